"""A scripted model for tests: fed a list of outputs or a function.

    from cycle.testing import script

    with script("judge", [{"verdicts": {...}}, "plain text", RateLimitError("slow down")]):
        model = get_model("scripted:judge")
        ...

Each call takes the next output: a ``str`` (text), a ``dict`` or a pydantic
object (JSON content, for structured output), a ``ModelOutput`` (as is) or an
exception (raised, so retries and errors can be tested). Or pass a function
``(messages, tools, config) -> output`` (sync or async) that answers every
call. Every call is recorded on the script (``.calls``). Scripted models are
``offline``: they cost nothing and reports say they are not a real model.
"""

from __future__ import annotations

import collections
import inspect
import json
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Self

from msgspec import Struct
from pydantic import BaseModel

from cycle.errors import ModelError
from cycle.llm.base import GenerateConfig, ModelAPI, ModelOutput, ProviderOptions
from cycle.records import Message, ToolDef, Usage

ScriptedOutput = str | dict | BaseModel | ModelOutput | BaseException
ScriptedFunction = Callable[
    [list[Message], list[ToolDef], GenerateConfig],
    ScriptedOutput | Awaitable[ScriptedOutput],
]


class ScriptedCall(Struct, frozen=True):
    """One call a scripted model received."""

    messages: list[Message]
    tools: list[ToolDef]
    config: GenerateConfig


class Script:
    """The outputs (or the function) behind ``scripted:<name>``."""

    def __init__(self, name: str, outputs: Iterable[ScriptedOutput] | ScriptedFunction, *,
                 repeat: bool = False) -> None:
        self.name = name
        self.function: ScriptedFunction | None = outputs if callable(outputs) else None
        self._outputs: list[ScriptedOutput] = [] if callable(outputs) else list(outputs)
        self._queue: collections.deque[ScriptedOutput] = collections.deque(self._outputs)
        #: start over when the outputs are used up (else: an error)
        self.repeat = repeat
        self.calls: list[ScriptedCall] = []
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        """Outputs not used yet."""
        return len(self._queue)

    async def answer(self, messages: list[Message], tools: list[ToolDef],
                     config: GenerateConfig) -> ModelOutput:
        with self._lock:
            self.calls.append(ScriptedCall(list(messages), list(tools), config))
            if self.function is None:
                if not self._queue and self.repeat and self._outputs:
                    self._queue.extend(self._outputs)
                if not self._queue:
                    raise ModelError(
                        f"scripted model {self.name!r} has no output left for call "
                        f"{len(self.calls)} (it was given {len(self._outputs)})",
                        hint="Give the script more outputs, a function, or repeat=True.",
                    )
                output: Any = self._queue.popleft()
        if self.function is not None:
            output = self.function(messages, tools, config)
            if inspect.isawaitable(output):
                output = await output
        return _to_output(output, messages, self.name)

    # a script is also a context manager that unregisters it on exit
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        unscript(self.name)


_SCRIPTS: dict[str, Script] = {}


def script(name: str, outputs: Iterable[ScriptedOutput] | ScriptedFunction, *,
           repeat: bool = False) -> Script:
    """Register ``scripted:<name>``; returns the Script (a context manager)."""
    entry = Script(name, outputs, repeat=repeat)
    _SCRIPTS[name] = entry
    return entry


def unscript(name: str) -> None:
    """Forget ``scripted:<name>``."""
    _SCRIPTS.pop(name, None)


def clear_scripts() -> None:
    """Forget every script."""
    _SCRIPTS.clear()


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _to_output(output: Any, messages: list[Message], name: str) -> ModelOutput:
    if isinstance(output, BaseException):
        raise output
    if isinstance(output, ModelOutput):
        return output
    if isinstance(output, BaseModel):
        text = output.model_dump_json()
    elif isinstance(output, (dict, list)):
        text = json.dumps(output)
    elif isinstance(output, str):
        text = output
    else:
        raise ModelError(
            f"scripted model {name!r} was given a {type(output).__name__}; expected str, dict, "
            "a pydantic object, ModelOutput or an exception"
        )
    usage = Usage(
        input_tokens=sum(_estimate(m.content) for m in messages),
        output_tokens=_estimate(text),
    )
    return ModelOutput(text=text, finish_reason="stop", usage=usage)


class ScriptedAPI(ModelAPI):
    """``scripted:<name>``: answers from a registered Script (or the one given)."""

    provider = "scripted"
    offline = True

    def __init__(self, model_name: str, options: ProviderOptions | None = None, *,
                 outputs: Iterable[ScriptedOutput] | ScriptedFunction | None = None,
                 repeat: bool = False) -> None:
        super().__init__(model_name, options)
        if outputs is not None:
            self.script = Script(model_name, outputs, repeat=repeat)
        elif model_name in _SCRIPTS:
            self.script = _SCRIPTS[model_name]
        else:
            known = ", ".join(sorted(_SCRIPTS)) or "none"
            raise ModelError(
                f"no script named {model_name!r} for scripted:{model_name}; "
                f"scripts registered: {known}",
                hint=f"Call cycle.testing.script({model_name!r}, [...]) first.",
            )

    @property
    def calls(self) -> list[ScriptedCall]:
        return self.script.calls

    async def generate(self, messages: list[Message], tools: list[ToolDef],
                       config: GenerateConfig) -> ModelOutput:
        return await self.script.answer(messages, tools, config)
