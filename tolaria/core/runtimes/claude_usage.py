"""What a Claude turn used, from its stream: each API message's usage as it comes, then the
result's totals, the model's context window and the plan's rate limits.

Every ``Usage`` this emits is the turn's whole usage so far (the store and the window keep
the last one), so the per-message ones and the result's are never added together.
"""

from __future__ import annotations

from typing import Any

from tolaria.core import ratelimits
from tolaria.core.events import Usage
from tolaria.core.runtimes.jsonl import int_or_none

#: One API message's tokens: input, output, cache read, cache written.
Tokens = tuple[int, int, int, int]


def _tokens(usage: dict[str, Any]) -> Tokens:
    return (int_or_none(usage.get("input_tokens")) or 0,
            int_or_none(usage.get("output_tokens")) or 0,
            int_or_none(usage.get("cache_read_input_tokens")) or 0,
            int_or_none(usage.get("cache_creation_input_tokens")) or 0)


class ClaudeUsage:
    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        #: Tokens of each API message so far (message id -> Tokens): Claude reports a turn's
        #: cost only in its result, but each message's usage as it comes, so a token limit can
        #: stop a run mid-way (tolaria/chats/engine/limits.py).
        self._messages: dict[str, Tokens] = {}
        self._model: str | None = None
        self._last: Usage | None = None
        self._rate_limits: list[ratelimits.Window] | None = None

    def message(self, message: dict[str, Any]) -> list[Usage]:
        """The turn's tokens so far, when this message says more than was known (a message
        printed once per content block repeats its usage: counted once)."""
        usage, mid = message.get("usage"), message.get("id")
        if not isinstance(usage, dict) or not isinstance(mid, str):
            return []
        tokens = _tokens(usage)
        if not any(tokens) or self._messages.get(mid) == tokens:
            return []
        self._messages[mid] = tokens
        model = message.get("model")
        if isinstance(model, str):
            self._model = model
        sums = [sum(t[i] for t in self._messages.values()) for i in range(4)]
        last = self._last
        return [self._emit(Usage(
            self.stream_id, input_tokens=sums[0], output_tokens=sums[1],
            cache_read_tokens=sums[2] or None, cache_write_tokens=sums[3] or None,
            context_tokens=sum(tokens),
            context_window=last.context_window if last else None,
            rate_limits=self._rate_limits))]

    def result(self, data: dict[str, Any]) -> list[Usage]:
        """The result's totals (they replace the per-message sums) and the context window."""
        usage = data.get("usage")
        if not isinstance(usage, dict):
            return []
        cost = data.get("total_cost_usd")
        tokens = _tokens(usage)
        last = self._last
        return [self._emit(Usage(
            self.stream_id,
            input_tokens=int_or_none(usage.get("input_tokens")),
            output_tokens=int_or_none(usage.get("output_tokens")),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            cache_read_tokens=tokens[2] if "cache_read_input_tokens" in usage else None,
            cache_write_tokens=tokens[3] if "cache_creation_input_tokens" in usage else None,
            context_tokens=last.context_tokens if last else None,
            context_window=self._window(data.get("modelUsage")),
            rate_limits=self._rate_limits))]

    def rate_limit(self, data: dict[str, Any]) -> list[Usage]:
        """A ``rate_limit_event``: the window it names, kept with the others reported."""
        windows = ratelimits.from_claude(data.get("rate_limit_info"))
        if not windows:
            return []
        self._rate_limits = ratelimits.merge(self._rate_limits, windows)
        last = self._last
        if last is None:
            return [self._emit(Usage(self.stream_id, rate_limits=self._rate_limits))]
        return [self._emit(Usage(
            self.stream_id, input_tokens=last.input_tokens, output_tokens=last.output_tokens,
            cost_usd=last.cost_usd, cache_read_tokens=last.cache_read_tokens,
            cache_write_tokens=last.cache_write_tokens, context_tokens=last.context_tokens,
            context_window=last.context_window, rate_limits=self._rate_limits))]

    def _window(self, model_usage: object) -> int | None:
        """The context window of the turn's model (``modelUsage``: one entry per model)."""
        if not isinstance(model_usage, dict):
            return None
        entries = [model_usage.get(self._model)] if self._model in model_usage else []
        entries += list(model_usage.values())
        for entry in entries:
            if isinstance(entry, dict) and (window := int_or_none(entry.get("contextWindow"))):
                return window
        return None

    def _emit(self, usage: Usage) -> Usage:
        self._last = usage
        return usage
