"""The Usage page (View → Usage, the command palette): tokens, cost and agent time of the stored
turns over a period, as totals, a chart per day stacked by agent, and a table per chat, agent
or day; then the plans' rate limits as each CLI last reported them.

It asks for its figures (``report_requested``: grouping, days) and shows what it is given
(``show_report``); it reads nothing itself.
"""

from __future__ import annotations

from datetime import date, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTabBar,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tolaria.chats.usage import UsageReport, agent_time, cost, tokens
from tolaria.core.ratelimits import describe
from tolaria.core.store.usage import BY_AGENT, BY_CHAT, BY_DAY, UsageRow
from tolaria.ui import theme
from tolaria.ui.usage.chart import METRICS, UsageChart, agent_color, days_of
from tolaria.ui.usage.limit_bars import LimitBars, LimitRow

#: The periods offered: label, days (0: every stored turn).
PERIODS = (("Last 7 days", 7), ("Last 30 days", 30), ("Last 90 days", 90), ("All time", 0))
_GROUPS = ((BY_CHAT, "By chat"), (BY_AGENT, "By agent"), (BY_DAY, "By day"))
_METRIC_LABELS = {"tokens": "Tokens", "cost": "Cost", "time": "Agent time"}
_COLUMNS = ("Turns", "In", "Out", "Cache read", "Cache write", "Cost", "Agent time")


class _Figure(QFrame):
    """One total: a large figure over a muted caption, and a smaller line under it."""

    def __init__(self, caption: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("usageFigure")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(2)
        self.caption = QLabel(caption, self)
        self.value = QLabel("—", self)
        self.value.setObjectName("usageFigureValue")
        self.detail = QLabel("", self)
        for label in (self.caption, self.value, self.detail):
            label.setTextFormat(Qt.TextFormat.PlainText)
            layout.addWidget(label)

    def set(self, value: str, detail: str = "") -> None:
        self.value.setText(value)
        self.detail.setText(detail)


class UsageWindow(QWidget):
    #: Figures wanted: grouping (chat, agent, day), days back (0: all).
    report_requested = Signal(str, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("usageWindow")
        self.setWindowTitle("Usage — Tolaria")
        self.resize(860, 720)
        self.report: UsageReport | None = None
        self._names: dict[str, str] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 20, 24, 20)
        outer.setSpacing(14)
        self.title = QLabel("Usage", self)
        self.title.setObjectName("usageTitle")
        self.note = QLabel("Tokens, cost and agent time of the turns Tolaria stored. Cost only "
                           "where the agent reports it.", self)
        self.note.setWordWrap(True)
        outer.addWidget(self.title)
        outer.addWidget(self.note)
        outer.addLayout(self._controls())
        figures = QHBoxLayout()
        figures.setSpacing(10)
        self.tokens_figure = _Figure("Tokens", self)
        self.cost_figure = _Figure("Cost", self)
        self.time_figure = _Figure("Agent time", self)
        self.turns_figure = _Figure("Turns", self)
        for figure in (self.tokens_figure, self.cost_figure, self.time_figure,
                       self.turns_figure):
            figures.addWidget(figure, 1)
        outer.addLayout(figures)
        self.chart = UsageChart(self)
        outer.addWidget(self.chart, 2)
        self.legend = QLabel(self)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        outer.addWidget(self.legend)
        self.groups = QTabBar(self)
        self.groups.setObjectName("usageGroups")
        self.groups.setDrawBase(False)
        self.groups.setExpanding(False)
        for _key, label in _GROUPS:
            self.groups.addTab(label)
        self.groups.currentChanged.connect(self._on_groups_current_changed)
        outer.addWidget(self.groups)
        self.table = QTableWidget(0, 1 + len(_COLUMNS), self)
        self.table.setObjectName("usageTable")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setDefaultAlignment(
            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        outer.addWidget(self.table, 3)
        self.limits_title = QLabel("Plan limits", self)
        self.limits_title.setObjectName("usageSection")
        self.limits = QLabel(self)
        self.limits.setTextFormat(Qt.TextFormat.PlainText)
        self.limits.setWordWrap(True)
        self.limit_bars = LimitBars(self)
        self.limit_bars.hide()
        outer.addWidget(self.limits_title)
        outer.addWidget(self.limit_bars)
        outer.addWidget(self.limits)
        self.restyle()
        theme.on_palette_change(self, self.restyle)

    def _controls(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.period = QComboBox(self)
        self.period.setObjectName("usagePeriod")
        for label, days in PERIODS:
            self.period.addItem(label, days)
        self.period.setCurrentIndex(1)
        self.period.currentIndexChanged.connect(lambda _i: self.request())
        self.metric_box = QComboBox(self)
        self.metric_box.setObjectName("usageMetric")
        for name in METRICS:
            self.metric_box.addItem(_METRIC_LABELS[name], name)
        self.metric_box.currentIndexChanged.connect(lambda _i: self._show_chart())
        self.refresh = QPushButton("Refresh", self)
        self.refresh.clicked.connect(self.request)
        row.addWidget(self.period)
        row.addWidget(QLabel("Chart:", self))
        row.addWidget(self.metric_box)
        row.addStretch(1)
        row.addWidget(self.refresh)
        return row

    # -- intents -------------------------------------------------------------------------------
    @property
    def grouping(self) -> str:
        return _GROUPS[max(0, self.groups.currentIndex())][0]

    @property
    def days(self) -> int:
        return int(self.period.currentData())

    def request(self) -> None:
        self.report_requested.emit(self.grouping, self.days)

    def _on_groups_current_changed(self, _index: int) -> None:
        self.request()

    # -- facts ---------------------------------------------------------------------------------
    def show_report(self, report: UsageReport, names: dict[str, str] | None = None) -> None:
        self.report = report
        self._names = names or self._names
        total = report.total
        self.tokens_figure.set(tokens(total.tokens),
                               f"{tokens(total.input_tokens)} in · {tokens(total.output_tokens)}"
                               f" out · {tokens(total.cache_read_tokens)} cache read")
        costed = (f"reported by {total.costed_turns} of {total.turns} turns"
                  if total.turns else "")
        self.cost_figure.set(cost(total.cost_usd), costed)
        self.time_figure.set(agent_time(total.agent_ms), "wall time of the runs")
        self.turns_figure.set(f"{total.turns:,}", f"{len(report.rows)} "
                              f"{dict(_GROUPS)[report.by].split()[-1]}s"
                              if report.by != BY_DAY else f"{len(report.rows)} days")
        self._show_chart()
        self._show_table(report.rows)
        self._show_limits()

    def agents(self) -> list[str]:
        """The period's agents, most tokens first (their colours follow this order)."""
        if self.report is None:
            return []
        totals: dict[str, int] = {}
        for bar in self.report.bars:
            totals[bar.agent] = totals.get(bar.agent, 0) + bar.tokens
        return sorted(totals, key=lambda a: (-totals[a], a))

    def _show_chart(self) -> None:
        if self.report is None:
            return
        since = self.report.since
        first = datetime.fromtimestamp(since).date() if since is not None else None
        days = days_of(self.report.bars, first, date.today())
        if first is None and len(days) > 366:
            days = days[-366:]  # all time: the last year drawn, the table has the rest
        agents = self.agents()
        self.chart.set_data(days, agents, str(self.metric_box.currentData()), self._names)
        dark = theme.is_dark()
        swatches = [f"<span style='color:{agent_color(a, agents, dark).name()}'>■</span>&nbsp;"
                    f"{_escape(self._names.get(a, a))}" for a in agents]
        self.legend.setText("&nbsp;&nbsp;&nbsp;".join(swatches))

    def _show_table(self, rows: list[UsageRow]) -> None:
        first = {BY_CHAT: "Chat", BY_AGENT: "Agent", BY_DAY: "Day"}[self.grouping]
        self.table.setHorizontalHeaderLabels([first, *_COLUMNS])
        if (head := self.table.horizontalHeaderItem(0)) is not None:
            head.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.table.setRowCount(len(rows))
        agents, dark = self.agents(), theme.is_dark()
        for r, row in enumerate(rows):
            name = self._names.get(row.label, row.label) if self.grouping == BY_AGENT \
                else row.label
            if self.grouping == BY_CHAT and row.agent:
                name = f"{row.label}  ·  {self._names.get(row.agent, row.agent)}"
            item = QTableWidgetItem(name)
            if self.grouping == BY_AGENT:
                item.setIcon(_swatch(agent_color(row.label, agents, dark)))
            self.table.setItem(r, 0, item)
            cells = (f"{row.turns:,}", tokens(row.input_tokens), tokens(row.output_tokens),
                     tokens(row.cache_read_tokens), tokens(row.cache_write_tokens),
                     cost(row.cost_usd), agent_time(row.agent_ms))
            for c, text in enumerate(cells, start=1):
                cell = QTableWidgetItem(text)
                cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, cell)
        self.table.resizeColumnsToContents()
        for column in range(1, self.table.columnCount()):  # air between the figures
            self.table.setColumnWidth(column, self.table.columnWidth(column) + 18)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)

    def _show_limits(self) -> None:
        """A bar a window, its words beside it (and all of them as the label's text)."""
        lines, rows = [], []
        for agent, state in sorted((self.report.rate_limits if self.report else {}).items()):
            when = datetime.fromtimestamp(state.at)
            said = when.strftime("%H:%M") if when.date() == date.today() \
                else when.strftime("%Y-%m-%d %H:%M")
            name = self._names.get(agent, agent)
            for window in state.rate_limits or []:
                lines.append(f"{name} · {describe(window)} (as of {said})")
                words = describe(window)
                caption, _, detail = words.partition(": ")
                used = window.get("used_percent")
                rows.append(LimitRow(f"{name} · {caption}",
                                     used / 100 if isinstance(used, int | float) else None,
                                     f"{detail} (as of {said})",
                                     window.get("status") == "rejected"))
        self.limits.setText("\n".join(lines) if lines else
                            "No CLI has reported its plan's limits yet (Claude and Codex do "
                            "on subscription plans).")
        self.limit_bars.set_rows(rows)
        self.limits.setVisible(not rows)

    # -- look ----------------------------------------------------------------------------------
    def restyle(self) -> None:
        muted, border = theme.css(theme.muted_text()), theme.css(theme.border())
        card = theme.css(theme.card_background())
        size = theme.body_point_size()
        self.title.setStyleSheet(f"font-size: {size * 1.7:.0f}pt; font-weight: 600;")
        self.note.setStyleSheet(f"color: {muted};")
        self.limits_title.setStyleSheet("font-weight: 600;")
        self.limits.setStyleSheet(f"color: {muted};")
        for figure in (self.tokens_figure, self.cost_figure, self.time_figure,
                       self.turns_figure):
            figure.setStyleSheet(f"#usageFigure {{ background: {card}; border: 1px solid "
                                 f"{border}; border-radius: 8px; }}")
            figure.caption.setStyleSheet(f"color: {muted};")
            figure.detail.setStyleSheet(f"color: {muted}; font-size: {size * 0.9:.1f}pt;")
            figure.value.setStyleSheet(f"font-size: {size * 1.6:.0f}pt; font-weight: 600;")
        self.table.setStyleSheet(f"QTableWidget {{ border: 1px solid {border}; "
                                 f"border-radius: 6px; }}")
        if self.report is not None:
            self._show_chart()
            self._show_table(self.report.rows)


def _swatch(color: QColor) -> QPixmap:
    pixmap = QPixmap(10, 10)
    pixmap.fill(color)
    return pixmap


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

