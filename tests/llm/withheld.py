"""A judge's call whose answer the provider withheld, for every provider's hostile tests."""

from __future__ import annotations

from typing import Any

import pytest

from cycle.errors import MalformedResponseError
from cycle.records import Message

SCORE = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


async def judge_withheld(model: Any, server: Any, reply: Any, says: str) -> None:
    """The structured call (a judge's) answered by ``reply``, withheld: the error names
    why (``says``), not "does not follow the schema", and no repair is asked for."""
    server.enqueue(reply)
    with pytest.raises(MalformedResponseError, match=says):
        await model.generate_structured([Message.user("hi")], SCORE)
    assert server.request_count == 1
