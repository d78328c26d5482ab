"""A provider that bills as it likes and tells cycle what it likes (issue 32's hostile
world): one token a character of what it is sent and what it answers, and its usage
told as it is, left out, sent as text, as zeros or fractions, or its answer longer than ``max_tokens``."""

from __future__ import annotations

import threading
import time
from typing import Any

from cycle.records import Usage
from cycle.testing.server import ChatRequest, Reply

#: what the server tells cycle of its usage
MODES = ("told", "omitted", "strings", "zeros", "fractions", "ignores_max_tokens")


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
        #: (tokens billed in, tokens answered, the request) per answered request
        self._answered: list[tuple[int, int, ChatRequest]] = []
        self._lock = threading.Lock()

    @property
    def tokens(self) -> list[tuple[int, int]]:
        """(tokens billed in, tokens billed out) per answered request: a streamed answer
        the client stopped reading is billed as far as it was written (waiting, a moment,
        for the server to notice the streams whose client has gone)."""
        with self._lock:
            answered = list(self._answered)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
                r.streamed is None and isinstance(r.body, dict) and r.body.get("stream")
                for _, _, r in answered):
            time.sleep(0.01)
        return [(sent, said if r.streamed is None else min(said, r.streamed))
                for sent, said, r in answered]

    def __call__(self, request: ChatRequest) -> Reply:
        sent = sum(len(str(m.get("content") or "")) for m in request.messages)
        said = len(self.answer)
        with self._lock:
            self._answered.append((sent, said, request))
        usage = {"prompt_tokens": sent, "completion_tokens": said, "total_tokens": sent + said}
        if self.mode == "omitted":
            return Reply(text=self.answer, no_usage=True)
        if self.mode == "zeros":
            return Reply(text=self.answer, usage={k: 0 for k in usage})
        if self.mode == "fractions":
            return Reply(text=self.answer, usage={k: v / 3 for k, v in usage.items()})
        if self.mode == "strings":
            return Reply(text=self.answer, usage={k: str(v) for k, v in usage.items()})
        return Reply(text=self.answer, usage=usage)

    def billed(self, pricing: Any, model: str, since: int = 0) -> float:
        """USD billed for the requests answered from the ``since``-th on."""
        tokens = self.tokens[since:]
        return sum(pricing.cost(model, Usage(input_tokens=i, output_tokens=o)).usd
                   for i, o in tokens)
