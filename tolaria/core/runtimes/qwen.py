"""Qwen Code's ``--output-format stream-json`` dialect: Claude's, with two differences.

Checked against real captured output (tests/fixtures/qwen/): the lines are Claude's
(``system/init``, one ``assistant`` line per block, ``user`` tool_result, ``result``), plus
``stream_event`` lines of Qwen's own (``goal_state``, ignored). But a failed ``result`` has no
``result`` text: its message is in ``error.message`` (``subtype`` ``error_during_execution``),
and the 401 text is also printed as an assistant text block ("[API Error: 401 ...]").
"""

from __future__ import annotations

from typing import Any

from tolaria.core.events import STOP_ERROR, Event
from tolaria.core.runtimes.base import Outcome
from tolaria.core.runtimes.claude import ClaudeStreamJson


class QwenStreamJson(ClaudeStreamJson):
    def _result(self, data: dict[str, Any]) -> list[Event]:
        out = super()._result(data)
        error = data.get("error")
        if (self._outcome is not None and self._outcome.stop_reason == STOP_ERROR
                and not data.get("result") and isinstance(error, dict)
                and isinstance(error.get("message"), str) and error["message"]):
            self._outcome = Outcome(STOP_ERROR, error=error["message"])
        return out
