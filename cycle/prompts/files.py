"""Prompt files: the YAML form of a prompt that users keep in git (``prompts/*.yaml``).

    id: support-reply
    version: 1.0.0
    system: |
      You are a support agent for Acme.
      Answer in two sentences.
    user_template: |
      Customer message: {{ input }}
    params:
      model: openai:gpt-4o-mini
      temperature: 0.2
    examples:                 # few-shot demonstrations, sent before the real user message
      - input: "Where is my parcel? Order 1042."
        output: |
          Hi, your parcel left our depot today; it arrives tomorrow.
        source: late-parcel     # optional: the case it was drawn from
    metadata:
      owner: support-team

The judge prompt (``cycle-judge``) may also carry ``rubrics:``, each criterion's rubric by
id, as ``cycle judge improve`` edits them.

``dump_prompt`` writes this canonical form (keys in this order, multi-line
strings as literal ``|`` blocks, empty ``system``/``params``/``tools``/``examples``/``rubrics``/``metadata`` left out), and ``load_prompt_file`` reads it back to the same prompt: so
``cycle prompt export`` of an imported canonical file reproduces it byte for
byte. Errors name the file, the line and the field, and say how to fix it.
The parameters cycle reads (model, temperature, top_p, max_tokens, seed,
stop, timeout) are type-checked at load time, and ``model`` must name a
known provider, so that a bad value fails here rather than mid-run; other
keys pass through untouched.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from msgspec import Struct
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

from cycle.errors import ConfigError, TemplateError
from cycle.prompts import semver
from cycle.prompts.examples import check_examples
from cycle.prompts.template import compile_template
from cycle.prompts.tools import (
    TOOL_NAME,
    check_parameters,
    check_unique,
    import_tool_function,
    tool_from_function,
)
from cycle.records import Example, Prompt, ToolDef
from cycle.yamlload import LoadedYaml, parse_yaml, read_text, validate

#: keys in the order they are written
KEYS: tuple[str, ...] = ("id", "version", "system", "user_template", "params", "tools", "examples",
                         "rubrics", "metadata")


#: a prompt id: what the store accepts (kept in step with cycle.store.store._PROMPT_ID)
PROMPT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]*$"


class PromptParams(BaseModel):
    """The model parameters cycle reads, typed so that a wrong value fails at import
    (naming its line) rather than in the middle of a run. Other keys pass through."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: StrictStr | None = Field(None, description="a model name provider:model, e.g. openai:gpt-4o-mini")
    temperature: float | None = Field(None, ge=0, le=2, description="a number from 0 to 2")
    top_p: float | None = Field(None, ge=0, le=1, description="a number from 0 to 1")
    max_tokens: int | None = Field(None, ge=1, description="a whole number of tokens, at least 1")
    seed: int | None = Field(None, description="a whole number")
    stop: StrictStr | list[StrictStr] | None = Field(None, description="a text or a list of texts")
    timeout: float | None = Field(None, gt=0, description="a number of seconds above 0")

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # the registry's own check: same form rule, same list of known providers
        from cycle.errors import ModelError
        from cycle.llm.registry import parse_model_name, providers

        try:
            provider, _ = parse_model_name(value)
        except ModelError as e:
            raise ValueError(e.message) from None
        if provider not in providers(internal=True):
            raise ValueError(
                f"unknown model provider '{provider}'; known providers: {', '.join(providers())} "
                "(e.g. openai:gpt-4o-mini, gemini:gemini-2.5-flash, offline:default)"
            )
        return value


class ToolEntry(BaseModel):
    """One tool of a prompt file: declared by hand, or from a Python function."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: StrictStr | None = Field(None, pattern=TOOL_NAME.pattern, description="the tool's name")
    description: StrictStr | None = Field(None, description="what the tool does, for the model")
    parameters: dict[str, Any] | None = Field(None, description="a JSON schema of the arguments")
    function: StrictStr | None = Field(
        None, description="package.module:name of the real function (schema from its signature)")

    @model_validator(mode="after")
    def _complete(self) -> ToolEntry:
        if self.function is None and self.name is None:
            raise ValueError("a tool needs a name (or a function to take it from)")
        if self.parameters is not None:
            check_parameters(self.parameters, tool=self.name or str(self.function))
        return self


class ExampleEntry(BaseModel):
    """One few-shot example of a prompt file."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input: dict[str, Any] | StrictStr = Field(
        description="the user's message, or a mapping of the template's variables (as a case's input)")
    output: StrictStr = Field(min_length=1, description="the ideal answer, as text")
    source: StrictStr | None = Field(None, min_length=1, description="the id of the case it came from")


class PromptFileModel(BaseModel):
    """The schema of a prompt file."""

    model_config = ConfigDict(extra="forbid", strict=False, allow_inf_nan=False)

    id: StrictStr = Field(
        min_length=1, pattern=PROMPT_ID_PATTERN,
        description="Stable name of the prompt, e.g. 'support-reply'.",
    )
    version: str | None = Field(
        None, description="Version number to store it as when it is new (1.0.0 if absent)."
    )
    system: StrictStr = Field("", description="The system prompt (a jinja2 template).")
    user_template: StrictStr = Field("{{ input }}", description="The user message template.")
    params: PromptParams = Field(default_factory=PromptParams, description="model, temperature, max_tokens...")
    tools: list[ToolEntry] = Field(default_factory=list, description="Tools the model may call.")
    examples: list[ExampleEntry] = Field(
        default_factory=list, description="Few-shot demonstrations: {input, output}.")
    rubrics: dict[StrictStr, StrictStr] = Field(
        default_factory=dict, description="The judge prompt's criteria rubrics, by criterion "
        "id (cycle judge improve).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free metadata, not versioned.")

    @field_validator("version")
    @classmethod
    def _semver(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return semver.normalize(value)
        except ValueError as e:
            raise ValueError(f"{e} (write it in quotes if YAML reads it as a number)") from None


class PromptFile(Struct, frozen=True):
    """A loaded prompt file: the prompt, the version it names (if any), where it came from."""

    prompt: Prompt
    version: str | None
    path: str


def parse_prompt(text: str, file: str = "<prompt>") -> PromptFile:
    """Parse prompt-file text; ConfigError/TemplateError name ``file``, the line and the field."""
    doc = parse_yaml(text, file)
    if not isinstance(doc.data, dict):
        raise ConfigError(
            "a prompt file is a mapping with keys " + ", ".join(KEYS),
            file=file, line=doc.line_of(()) or 1,
            hint="Start from an example: cycle prompt export ID, or prompts/ in the repository.",
        )
    if "id" not in doc.data:
        raise ConfigError(
            "required key 'id' is missing", file=file, line=doc.line_of(()) or 1, field="id",
            hint="Add the prompt's stable name, e.g. id: support-reply",
        )
    if "version" in doc.data and isinstance(doc.data["version"], int | float):
        # YAML reads 1.0 as a float: say what to write instead of pydantic's type message
        raise ConfigError(
            f"version must be a string like 1.0.0, not {doc.data['version']!r}",
            file=file, line=doc.line_of(("version",)), field="version",
        )
    try:
        model = validate(PromptFileModel, doc, what="a prompt file")
    except ConfigError as e:
        raise _with_fix(e) from None
    _no_near_miss(model.params, doc)
    for name in ("system", "user_template"):
        _check_template(getattr(model, name), name, doc, text)
    tools = _tools(model.tools, doc, file)
    prompt = Prompt(
        id=model.id, system=model.system, user_template=model.user_template,
        # the params as written (validation only checked them): the round trip stays exact
        params=dict(doc.data.get("params") or {}), tools=tools,
        examples=tuple(Example(**e.model_dump(exclude_none=True)) for e in model.examples),
        rubrics=model.rubrics, metadata=model.metadata,
    )
    try:
        check_examples(prompt)
    except TemplateError as e:
        path = tuple(int(p) if p.isdigit() else p
                     for p in (e.field or "examples").replace("[", ".").replace("]", "").split("."))
        raise TemplateError(e.message.split(": ", 1)[-1], file=file, line=doc.line_of(path),
                            field=e.field, hint=e.hint) from None
    return PromptFile(prompt=prompt, version=model.version, path=file)


def _no_near_miss(params: PromptParams, doc: LoadedYaml) -> None:
    """Other params pass through, but a key one letter away from one cycle reads is a
    typo that would silently drop the setting (``temprature: 0`` runs at the default)."""
    for key in params.model_extra or {}:
        close = difflib.get_close_matches(key, list(PromptParams.model_fields), n=1, cutoff=0.8)
        if close:
            raise ConfigError(
                f"unknown parameter '{key}'", file=doc.file, line=doc.line_of(("params", key)),
                field=f"params.{key}", hint=f"Did you mean '{close[0]}'?",
            )


def _tools(entries: list[ToolEntry], doc: LoadedYaml, file: str) -> tuple[ToolDef, ...]:
    """The declared tools; a function tool's schema and descriptions come from its code."""
    out: list[ToolDef] = []
    base = Path(file).resolve().parent if file != "<prompt>" else None
    for i, entry in enumerate(entries):
        try:
            if entry.function is not None and entry.parameters is None:
                fn = import_tool_function(entry.function, base=base)
                tool = tool_from_function(fn, entry.function, name=entry.name,
                                          description=entry.description)
            else:
                tool = ToolDef(name=entry.name or entry.function or "", description=entry.description or "",
                               parameters=entry.parameters or {"type": "object", "properties": {}},
                               function=entry.function)
            if not TOOL_NAME.match(tool.name):
                raise ValueError(f"'{tool.name}' cannot be a tool name (letters, digits, _ . -)")
            out.append(tool)
            check_unique(out)
        except ValueError as e:
            raise ConfigError(str(e), file=file, line=doc.line_of(("tools", i)), field=f"tools[{i}]",
                              hint="A tool is {name, description, parameters: {type: object, "
                              "properties: ...}} or {function: package.module:name}.") from None
    return tuple(out)


#: how to write each top-level field, for a value of the wrong type
_FIXES: dict[str, str] = {
    "id": "Write the prompt's stable name: letters, digits, '.', '_', '-' or '/', "
    "starting with a letter or digit (e.g. id: support-reply).",
    "system": "Write the system prompt as text (for several lines, a block: system: |); "
    "quote a value YAML would read as a number or yes/no.",
    "user_template": "Write the template as text, e.g. user_template: 'Customer: {{ input }}'.",
    "params": "params is a mapping, e.g.\n  params:\n    model: openai:gpt-4o-mini\n    temperature: 0.2",
    "metadata": "metadata is a mapping of your own keys, e.g.\n  metadata:\n    owner: support-team",
    "examples": "examples is a list of demonstrations, each with an input (the user's message, "
    "or the template's variables) and an output (the ideal answer), e.g.\n  examples:\n"
    "    - input: Where is my parcel?\n      output: It arrives tomorrow.",
}


def _with_fix(error: ConfigError) -> ConfigError:
    """The validation error in words a user acts on, with the fix for its field."""
    if not error.field:
        return error
    top = error.field.split(".")[0].split("[")[0]
    hint = _FIXES.get(top)
    if top == "params" and error.field != "params":
        key = error.field.split(".", 1)[1]
        described = PromptParams.model_fields.get(key)
        hint = f"params.{key} is {described.description}." if described else error.hint
    message = error.message.split(": ", 1)[-1] if (error.file or error.field) else error.message
    # pydantic's wording names our classes and its validator kinds: keep what a user can act on
    message = re.sub(r" or instance of \w+", "", message).removeprefix("Value error, ")
    if message.startswith("String should match pattern"):
        message = "not a valid prompt id"
    return ConfigError(message, file=error.file, line=error.line, field=error.field,
                       hint=hint or error.hint)


def load_prompt_file(path: str | Path) -> PromptFile:
    """Read and parse one prompt file."""
    return parse_prompt(read_text(path), str(path))


def _check_template(source: str, name: str, doc: LoadedYaml, text: str) -> None:
    try:
        compile_template(source, field=name)
    except TemplateError as e:
        import jinja2  # loaded: only jinja2 finds a template that does not compile

        cause = e.__cause__
        detail = cause.message if isinstance(cause, jinja2.TemplateSyntaxError) else e.message
        raise TemplateError(
            f"template does not compile: {detail}",
            file=doc.file,
            line=_file_line(doc, text, name, e.line),
            field=name,
            hint="Check the {{ }} and {% %} tags; see https://jinja.palletsprojects.com/templates/",
        ) from cause


def _file_line(doc: LoadedYaml, text: str, name: str, template_line: int | None) -> int | None:
    """The line in the file of line ``template_line`` of a template field."""
    key_line = doc.line_of((name,))
    if key_line is None or not template_line:
        return key_line
    lines = text.splitlines()
    header = lines[key_line - 1].rstrip() if key_line <= len(lines) else ""
    # a block scalar ("system: |") starts on the next line; a one-line value is on the key's line
    if header.split("#")[0].rstrip().endswith(("|", "|-", "|+", ">", ">-", ">+")):
        return key_line + template_line
    return key_line


class _Dumper(yaml.SafeDumper):
    """Block style for mappings, literal ``|`` blocks for multi-line strings."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\x85" in value:
        # YAML reads NEL (U+0085) as a line break, even inside a | block or quotes;
        # only a double-quoted scalar (written \N) brings it back as it was
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def prompt_document(prompt: Prompt, version: str | None = None) -> dict[str, Any]:
    """The canonical mapping of a prompt file, keys in ``KEYS`` order, empties left out."""
    doc: dict[str, Any] = {"id": prompt.id}
    if version:
        doc["version"] = version
    if prompt.system:
        doc["system"] = prompt.system
    doc["user_template"] = prompt.user_template
    if prompt.params:
        doc["params"] = prompt.params
    if prompt.tools:
        doc["tools"] = [t.model_dump(exclude_none=True) for t in prompt.tools]
    if prompt.examples:
        doc["examples"] = [e.canonical() for e in prompt.examples]
    if prompt.rubrics:
        doc["rubrics"] = dict(prompt.rubrics)
    if prompt.metadata:
        doc["metadata"] = prompt.metadata
    return doc


def dump_prompt(prompt: Prompt, version: str | None = None) -> str:
    """The canonical YAML text of a prompt file."""
    return yaml.dump(
        prompt_document(prompt, version),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1 << 30,  # never fold long lines: the text must come back exactly
    )


def save_prompt_file(path: str | Path, prompt: Prompt, version: str | None = None) -> None:
    """Write the canonical YAML of ``prompt`` to ``path`` (directories created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dump_prompt(prompt, version), encoding="utf-8")


def write_back(path: str | Path, prompt: Prompt, version: str | None = None) -> None:
    """Rewrite the prompt file at ``path`` to hold ``prompt`` (and its ``version``), keeping
    its comments, key order and layout: only the values that changed are replaced
    (ruamel.yaml's round trip; multi-line texts stay literal blocks). The text written is
    read back and must load as ``prompt`` before it replaces the file (atomically)."""
    import io
    import os
    import tempfile

    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import LiteralScalarString

    from cycle.yamlload import read_text, round_trip

    p = Path(path)
    rt, data = round_trip(read_text(p), str(p))
    if not isinstance(data, CommentedMap):
        raise ConfigError("expected a mapping (id:, system:, user_template:, ...)", file=str(p))
    if data.get("id") != prompt.id:
        raise ConfigError(f"this file holds prompt '{data.get('id')}', not '{prompt.id}'",
                          file=str(p), field="id")

    def styled(value: Any) -> Any:
        if isinstance(value, list):  # examples: each text of several lines a | block too
            return [styled(v) for v in value]
        if isinstance(value, dict):
            return CommentedMap((k, styled(v)) for k, v in value.items())
        return LiteralScalarString(value) if isinstance(value, str) and "\n" in value else value

    new = prompt_document(prompt, version)
    for key, value in new.items():
        if key == "version" and "version" not in data:
            data.insert(1, "version", value)  # the file says which version it holds
        elif key == "params" and isinstance(data.get("params"), CommentedMap):
            params = data["params"]
            for name in [k for k in params if k not in value]:
                del params[name]
            for name, v in value.items():
                if params.get(name) != v:
                    params[name] = styled(v)
        elif key == "tools" and isinstance(data.get("tools"), list) and [
                t.get("name") for t in data["tools"]] == [t["name"] for t in value]:
            for entry, tool in zip(data["tools"], value, strict=True):
                for name, v in tool.items():
                    if entry.get(name) != v:
                        entry[name] = styled(v)
        elif data.get(key) != value:
            data[key] = styled(value)
    for key in [k for k in data if k in KEYS and k not in new]:
        del data[key]
    out = io.StringIO()
    rt.dump(data, out)
    text = out.getvalue()
    if parse_prompt(text, str(p)).prompt.content_hash != prompt.content_hash:
        raise ConfigError("the rewritten file would not hold the version exactly; nothing "
                          "was written", file=str(p),
                          hint="Export it to a new file instead: cycle prompt export ID -o FILE")
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
