"""Rendering a prompt's templates.

Templates are rendered by jinja2's ``SandboxedEnvironment`` with
``StrictUndefined``: a missing variable is an error, not an empty string, and
template tricks such as reaching ``__class__`` fail.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from cycle.errors import TemplateError
from cycle.records import Prompt


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


@lru_cache(maxsize=1)
def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)


@lru_cache(maxsize=512)
def compile_template(source: str, *, field: str = "template") -> jinja2.Template:
    """Compile once, cache by source (templates are rendered per case and iteration)."""
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(
            f"template does not compile: {e.message}", field=field, line=e.lineno
        ) from e


def render(source: str, variables: dict[str, Any], *, field: str = "template") -> str:
    """Render a sandboxed template; a missing variable or unsafe access is a TemplateError."""
    template = compile_template(source, field=field)
    try:
        return template.render(**variables)
    except jinja2.UndefinedError as e:
        known = ", ".join(sorted(variables)) or "none"
        raise TemplateError(
            f"template uses an undefined variable: {e.message}",
            field=field,
            hint=f"Variables given: {known}.",
        ) from e
    except jinja2.exceptions.SecurityError as e:
        raise TemplateError(f"template tried an unsafe operation: {e}", field=field) from e
    except Exception as e:  # any failure inside a user's template is the template's
        # {{ 1/0 }}, {{ input + 1 }} on text, an {% include %} (no loader), a range too big:
        # the user's template failed, not cycle, so it is an input error with the field named
        raise TemplateError(
            f"template failed to render: {e.__class__.__name__}: {e}",
            field=field,
            hint="Check the expressions in the template against the case's input.",
        ) from e
