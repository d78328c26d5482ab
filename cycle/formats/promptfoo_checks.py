"""promptfoo's code assertions as cycle ``python`` checks: what the module ``cycle import
promptfoo`` writes beside cycle.yaml (``promptfoo_checks.py``) builds its checks with these.

A ``python`` assertion runs the config's own code, in cycle's process, as promptfoo runs
it: an inline value is the body of ``main(output, context)`` (one line is returned, several
are the body, indented as promptfoo indents them), a ``file://x.py[:fn]`` value calls
``get_assert`` (or ``fn``) of that file; ``context`` holds ``prompt``, ``vars``, ``test``
and ``config``. Its result is read as promptfoo reads it: a bool passes when true; a number
passes when above 0, or at least the assertion's ``threshold``; ``{pass, score, reason}``
(with a ``threshold``: failing below it) passes as it says; the strings ``"true"``,
``"false"``, JSON and numbers are read as those. Code that raises, or a result of another
kind, fails the assertion (as in promptfoo: not an error of the case). ``not-python``
inverts the verdict. The check scores 100 when the assertion passes, else 0; the reason
gives promptfoo's score.

The javascript assertions cycle converts (``output.length < N`` and
``output.toLowerCase().includes('x')``) are checked here too, as JavaScript computes them:
a length in UTF-16 code units, a lower case by Unicode's default mapping.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from cycle.imports import module_at
from cycle.judge.checks import CheckContext

#: a check: its score and reason (an ``async def`` assertion's: a coroutine giving them)
Check = Callable[[CheckContext], tuple[float, str] | Coroutine[Any, Any, tuple[float, str]]]

_NUMBER = re.compile(r"\s*([+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))")


def _parse_float(text: str) -> float | None:
    """JavaScript's ``parseFloat``: the number at the start of the text, else None (NaN)."""
    m = _NUMBER.match(text)
    return None if m is None else float(m[1].replace("Infinity", "inf"))


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def verdict(result: Any, *, threshold: float | None, inverse: bool) -> tuple[bool, str]:
    """Whether promptfoo passes an assertion whose code returned ``result``, and why."""
    if isinstance(result, str):
        low = result.lower()
        if low in ("true", "false"):
            result = low == "true"
        elif result.startswith("{"):
            try:
                result = json.loads(result)
            except ValueError as e:
                return inverse, f"Python code execution failed: Invalid JSON: {e}"
            if not isinstance(result, dict):
                return inverse, f"the code returned {result!r}, not a boolean, number or GradingResult"
        else:
            number = _parse_float(result)
            if number is None:
                return inverse, f"the code returned {result[:80]!r}, not a boolean or number"
            result = number
    if isinstance(result, bool):
        passed = result != inverse
        return passed, f"the code returned {result}"
    if isinstance(result, int | float):
        raw = result > 0 if threshold is None else result >= threshold
        rule = "above 0" if threshold is None else f"at least {threshold}"
        return raw != inverse, f"score {result} ({'' if raw else 'not '}{rule})"
    if isinstance(result, dict):
        graded = {_camel(str(k)): v for k, v in result.items()}
        if not (isinstance(graded.get("pass"), bool) and isinstance(graded.get("score"), int | float)
                and not isinstance(graded.get("score"), bool) and isinstance(graded.get("reason"), str)):
            return inverse, ("Python code execution failed: a returned mapping needs pass (bool), "
                             f"score (number) and reason (text): {json.dumps(result, default=str)[:120]}")
        passed, reason = graded["pass"], graded["reason"]
        if threshold is not None and graded["score"] < threshold:
            passed, reason = False, f"score {graded['score']} is less than threshold {threshold}: {reason}"
        return passed != inverse, f"score {graded['score']}: {reason}"
    if inspect.iscoroutine(result):
        # promptfoo awaits an ``async def`` only; a coroutine a plain function returns is
        # closed, so that it warns of nothing ("never awaited") when it is collected
        result.close()
        return inverse, ("the code returned a coroutine, not a boolean, number or "
                         "GradingResult: make the function itself async def to have it awaited")
    return inverse, (f"the code returned {type(result).__name__} {str(result)[:60]!r}, not a "
                     "boolean, number or GradingResult")


def _scored(passed: bool, reason: str) -> tuple[float, str]:
    return (100.0 if passed else 0.0), ("passed: " if passed else "failed: ") + reason


def _context(ctx: CheckContext, prompt: str | None, test: dict[str, Any],
             config: dict[str, Any] | None) -> dict[str, Any]:
    variables = dict(ctx.input) if isinstance(ctx.input, dict) else {}
    rendered = None
    if prompt is not None:
        from cycle.errors import TemplateError
        from cycle.prompts import render

        try:
            rendered = render(prompt, variables, field="prompt")
        except TemplateError:  # a case added by hand without the prompt's variables
            rendered = None
    return {"prompt": rendered, "vars": variables, "test": {**test, "vars": variables},
            "config": config, "logProbs": None, "provider": None, "providerResponse": None}


def script(code: str) -> str:
    """The Python promptfoo runs for an inline value: one line is returned, several are the
    body of ``main`` (each line indented by the first indented line's indentation)."""
    if "\n" in code:
        m = re.search(r"^(?!\s*$)\s+", code, re.MULTILINE)
        indent = m[0] if m else "    "
        body = "\n".join(indent + line for line in code.split("\n"))
    else:
        body = f"    return {code}"
    return f"import json\n\ndef main(output, context):\n{body}\n"


def python_inline(code: str, *, threshold: float | None = None, inverse: bool = False,
                  prompt: str | None = None, test: dict[str, Any] | None = None,
                  config: dict[str, Any] | None = None) -> Check:
    """A check running an inline ``python`` assertion (its value: ``code``)."""
    compiled: dict[str, Callable[..., Any]] = {}

    def check(ctx: CheckContext) -> tuple[float, str]:
        context = _context(ctx, prompt, test or {}, config)
        source = code
        if "{{" in code or "{%" in code:  # promptfoo renders the value with the test's vars
            from cycle.prompts import render

            source = render(code, context["vars"], field="python assertion")
        try:
            if source not in compiled:
                space: dict[str, Any] = {}
                exec(compile(script(source), "<promptfoo python assertion>", "exec"), space)  # noqa: S102 - the config's own code
                compiled[source] = space["main"]
            result = compiled[source](ctx.output, context)
        except Exception as e:  # noqa: BLE001 - promptfoo fails the assertion, the case is no error
            return _scored(inverse, f"Python code execution failed: {type(e).__name__}: {e}")
        return _scored(*verdict(result, threshold=threshold, inverse=inverse))

    return check


def python_file(path: Path, function: str = "get_assert", *, threshold: float | None = None,
                inverse: bool = False, prompt: str | None = None,
                test: dict[str, Any] | None = None, config: dict[str, Any] | None = None) -> Check:
    """A check calling ``function(output, context)`` of the Python file at ``path``; an
    ``async def`` one is awaited, as promptfoo awaits it (the check then returns what
    awaits it, which cycle's python check awaits)."""
    loaded: list[Callable[..., Any]] = []

    def check(ctx: CheckContext) -> tuple[float, str] | Coroutine[Any, Any, tuple[float, str]]:
        context = _context(ctx, prompt, test or {}, config)
        try:
            if not loaded:
                loaded.append(getattr(module_at(path), function))
            result = loaded[0](ctx.output, context)
            if inspect.iscoroutine(result) and inspect.iscoroutinefunction(loaded[0]):
                return _awaited(result, threshold=threshold, inverse=inverse)
        except Exception as e:  # noqa: BLE001 - as above
            return _scored(inverse, f"Python code execution failed: {type(e).__name__}: {e}")
        return _scored(*verdict(result, threshold=threshold, inverse=inverse))

    return check


async def _awaited(pending: Any, *, threshold: float | None, inverse: bool) -> tuple[float, str]:
    """An ``async def`` assertion's verdict, once its coroutine is awaited."""
    try:
        result = await pending
    except Exception as e:  # noqa: BLE001 - as python_file's
        return _scored(inverse, f"Python code execution failed: {type(e).__name__}: {e}")
    return _scored(*verdict(result, threshold=threshold, inverse=inverse))


def js_length(op: str, n: float, *, inverse: bool = False) -> Check:
    """``output.length OP n``: JavaScript's length, in UTF-16 code units."""
    compare = {"<": float.__lt__, "<=": float.__le__, ">": float.__gt__, ">=": float.__ge__,
               "===": float.__eq__, "==": float.__eq__, "!==": float.__ne__,
               "!=": float.__ne__}[op]

    def check(ctx: CheckContext) -> tuple[float, str]:
        length = len(ctx.output.encode("utf-16-le")) // 2
        held = compare(float(length), float(n))
        return _scored(held != inverse, f"output.length is {length} ({op} {n:g}: {held})")

    return check


def js_lower_includes(text: str, *, inverse: bool = False) -> Check:
    """``output.toLowerCase().includes(text)``: JavaScript's lower case, not a case fold."""

    def check(ctx: CheckContext) -> tuple[float, str]:
        held = text in ctx.output.lower()
        return _scored(held != inverse, f"the lower-cased output {'includes' if held else 'lacks'} "
                       f"{text!r}")

    return check
