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
"""

from __future__ import annotations

import re
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


@lru_cache(maxsize=1)
def _environment() -> SandboxedEnvironment:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


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
    try:
        return template.render(**variables)
    except Exception as e:  # sorted with jinja2's types, loaded by then if jinja2 rendered
        raise _render_error(e, variables, field) from e


def _render_error(e: Exception, variables: dict[str, Any], field: str) -> TemplateError:
    import jinja2

    if isinstance(e, jinja2.UndefinedError):
        known = ", ".join(sorted(variables)) or "none"
        return TemplateError(
            f"template uses an undefined variable: {e.message}",
            field=field,
            hint=f"Variables given: {known}.",
        )
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
