"""A provider that bills as it likes and tells cycle what it likes (issue 32's hostile
world): one token a character of what it is sent and what it answers, and its usage
told as it is, left out, sent as text, or its answer longer than ``max_tokens``."""

from __future__ import annotations

import threading
from typing import Any

from cycle.records import Usage
from cycle.testing.server import ChatRequest, Reply

#: what the server tells cycle of its usage
MODES = ("told", "omitted", "strings", "ignores_max_tokens")


class Billing:
    """A loopback server's responder that keeps what it billed (``tokens``): one token a
    character both ways (text in Chinese or Japanese is near that with real tokenizers).
    ``mode``: what it tells cycle (``MODES``); ``ignores_max_tokens`` answers
    ``answer_chars`` x 8, whatever ``max_tokens`` says."""

    def __init__(self, mode: str = "told", answer_chars: int = 64) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: one of {', '.join(MODES)}")
        self.mode = mode
        self.answer = "了" * (answer_chars * (8 if mode == "ignores_max_tokens" else 1))
        #: (tokens billed in, tokens billed out) per answered request
        self.tokens: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> Reply:
        sent = sum(len(str(m.get("content") or "")) for m in request.messages)
        said = len(self.answer)
        with self._lock:
            self.tokens.append((sent, said))
        usage = {"prompt_tokens": sent, "completion_tokens": said, "total_tokens": sent + said}
        if self.mode == "omitted":
            return Reply(text=self.answer, no_usage=True)
        if self.mode == "strings":
            return Reply(text=self.answer, usage={k: str(v) for k, v in usage.items()})
        return Reply(text=self.answer, usage=usage)

    def billed(self, pricing: Any, model: str, since: int = 0) -> float:
        """USD billed for the requests answered from the ``since``-th on."""
        with self._lock:
            tokens = self.tokens[since:]
        return sum(pricing.cost(model, Usage(input_tokens=i, output_tokens=o)).usd
                   for i, o in tokens)
