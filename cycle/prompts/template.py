"""Rendering a prompt's templates.

Templates are rendered by jinja2's ``SandboxedEnvironment`` with
``StrictUndefined``: a missing variable is an error, not an empty string, and
template tricks such as reaching ``__class__`` fail.

Most prompts are text with ``{{ name }}`` placeholders and nothing else. Such a
template is rendered as jinja2 would render it (the text as written, each placeholder
replaced by ``str`` of its variable) without loading jinja2, whose import is a quarter
of what ``cycle run`` spends over the bare SDK at start-up (86 M instructions, about
25 ms); every other template, and a placeholder whose variable is not given, goes
to jinja2 (tests/test_prompt.py renders both ways and compares).

A jinja2 render has a budget (``RENDER_BUDGET``): the items ``range()`` hands out and the
items ``*`` builds (text, lists) count against it, a render stops past ``RENDER_SECONDS``,
and its text may not pass ``RENDER_CHARS``. A template from an imported file or an
improver's edit with nested ``range(99999)`` loops hung a run; ``{{ 'A' * 3000000000 }}``
ended it in a MemoryError. Either is now an error of that template, named.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from cycle.errors import TemplateError
from cycle.records import Prompt

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment


def render_system(prompt: Prompt, variables: dict[str, Any]) -> str:
    """The prompt's system message for these variables."""
    return render(prompt.system, variables, field="system")


def render_user(prompt: Prompt, variables: dict[str, Any]) -> str:
    """The prompt's user message for these variables."""
    return render(prompt.user_template, variables, field="user_template")


def check_templates(prompt: Prompt) -> None:
    """Raise TemplateError if either of the prompt's templates does not compile."""
    compile_template(prompt.system, field="system")
    compile_template(prompt.user_template, field="user_template")


class Template(Protocol):
    def render(self, **variables: Any) -> str: ...


#: items one render may loop over through range() or build with * (far above any prompt)
RENDER_BUDGET = 2_000_000
#: seconds one render may take
RENDER_SECONDS = 5.0
#: characters one render may produce
RENDER_CHARS = 20_000_000


class RenderBomb(Exception):
    """A template passed its render budget."""


class _Budget:
    def __init__(self) -> None:
        self.left = RENDER_BUDGET
        self.deadline = time.monotonic() + RENDER_SECONDS

    def charge(self, items: int, what: str) -> None:
        self.left -= items
        if self.left < 0:
            raise RenderBomb(f"{what} passes the render budget of {RENDER_BUDGET:,} items "
                             "(a loop or a repetition too large for a prompt)")
        if time.monotonic() > self.deadline:
            raise RenderBomb(f"rendering took longer than {RENDER_SECONDS:g} s")


#: the budget of the render under way (None outside render(): jinja2's own limits only)
_budget: ContextVar[_Budget | None] = ContextVar("cycle_render_budget", default=None)


def _charge(items: int, what: str) -> None:
    budget = _budget.get()
    if budget is not None:
        budget.charge(items, what)


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


@lru_cache(maxsize=1)
def _environment() -> SandboxedEnvironment:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment, safe_range

    class Bounded(SandboxedEnvironment):
        """The sandbox, with every range() and repetition counted against the render's
        budget (a loop that prints nothing still calls range for each inner loop)."""

        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**":
                if isinstance(right, int) and abs(right) > 4096 and left not in (0, 1, -1):
                    raise RenderBomb(f"the power {right} is too large for a prompt")
            else:
                for seq, times in ((left, right), (right, left)):
                    size = _sized(seq)
                    if size is not None and isinstance(times, int):
                        _charge(size * max(times, 0), "a repetition with *")
            return super().call_binop(context, operator, left, right)

    def bounded_range(*args: int) -> range:
        rng = safe_range(*args)
        _charge(len(rng), f"range({', '.join(map(str, args))})")
        return rng

    env = Bounded(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals["range"] = bounded_range
    return env


#: ``{{ name }}``: a placeholder naming a variable and nothing else
_PLACEHOLDER = re.compile(r"\{\{[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\}\}")
#: names jinja2 reads as something other than a variable (constants, operators,
#: the template's own helpers): a placeholder of one is jinja2's to render
_NOT_VARIABLES = frozenset({
    "true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is",
    "if", "else", "self", "loop", "super", "caller", "varargs", "kwargs",
})


class _Substitution:
    """A template of text and ``{{ name }}`` placeholders, rendered without jinja2."""

    def __init__(self, source: str, parts: list[str]) -> None:
        self.source = source
        self.parts = parts  # text, name, text, name, ..., text

    def render(self, **variables: Any) -> str:
        out = []
        for i, part in enumerate(self.parts):
            if i % 2 == 0:
                out.append(part)
            elif part in variables:
                out.append(str(variables[part]))
            else:  # jinja2 says what is missing (or finds one of its globals)
                return _jinja(self.source).render(**variables)
        return "".join(out)


def _substitution(source: str) -> _Substitution | None:
    """The template as a _Substitution, if jinja2 would read it as one: its text holds
    no other tag or comment opening, no carriage return (jinja2 writes newlines as
    \\n), and no brace that could join a placeholder's."""
    parts = _PLACEHOLDER.split(source)
    for i, part in enumerate(parts):
        if i % 2 == 1:
            if part in _NOT_VARIABLES:
                return None
        elif ("{{" in part or "{%" in part or "{#" in part or "\r" in part
              or (i < len(parts) - 1 and part.endswith("{"))
              or (i > 0 and part.startswith("}"))):
            return None
    return _Substitution(source, parts)


@lru_cache(maxsize=512)
def _jinja(source: str) -> Template:
    return _environment().from_string(source)


@lru_cache(maxsize=512)
def compile_template(source: str, *, field: str = "template") -> Template:
    """Compile once, cache by source (templates are rendered per case and iteration)."""
    simple = _substitution(source)
    if simple is not None:
        return simple
    import jinja2

    try:
        return _jinja(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(
            f"template does not compile: {e.message}", field=field, line=e.lineno
        ) from e


def render(source: str, variables: dict[str, Any], *, field: str = "template") -> str:
    """Render a sandboxed template; a missing variable or unsafe access is a TemplateError."""
    template = compile_template(source, field=field)
    if isinstance(template, _Substitution):
        try:
            return template.render(**variables)
        except Exception as e:  # a placeholder without its variable: jinja2's error
            raise _render_error(e, variables, field) from e
    token = _budget.set(_Budget())
    try:
        text = template.render(**variables)
    except (Exception, MemoryError) as e:  # sorted with jinja2's types, loaded by then
        raise _render_error(e, variables, field) from e
    finally:
        _budget.reset(token)
    if len(text) > RENDER_CHARS:
        raise TemplateError(f"template rendered {len(text):,} characters, more than the "
                            f"{RENDER_CHARS:,} a prompt may have", field=field)
    return text


def _render_error(e: Exception, variables: dict[str, Any], field: str) -> TemplateError:
    import jinja2

    if isinstance(e, jinja2.UndefinedError):
        known = ", ".join(sorted(variables)) or "none"
        return TemplateError(
            f"template uses an undefined variable: {e.message}",
            field=field,
            hint=f"Variables given: {known}.",
        )
    if isinstance(e, RenderBomb | MemoryError):
        return TemplateError(f"template stopped: {e or 'it ran out of memory'}", field=field,
                             hint="A prompt template renders text: remove the loop or "
                             "repetition that makes it this large.")
    if isinstance(e, jinja2.exceptions.SecurityError):
        return TemplateError(f"template tried an unsafe operation: {e}", field=field)
    # any failure inside a user's template is the template's: {{ 1/0 }}, {{ input + 1 }}
    # on text, an {% include %} (no loader), a range too big: the user's template
    # failed, not cycle, so it is an input error with the field named
    return TemplateError(
        f"template failed to render: {e.__class__.__name__}: {e}",
        field=field,
        hint="Check the expressions in the template against the case's input.",
    )
