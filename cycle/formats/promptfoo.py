"""promptfoo configs in: a ``promptfooconfig.yaml`` becomes a cycle project
(``cycle import promptfoo``).

- **prompts**: the first becomes the prompt (a string is its user template, promptfoo's
  ``{{var}}`` being cycle's; ``file://x.txt`` is read beside the config; ``{raw: ...}``
  too); every other prompt is listed (a cycle project improves one prompt: import it
  again with ``--prompt N`` for another).
- **providers**: the first, when cycle knows its provider (``openai:``, ``openai:chat:``,
  ``google:``/``vertex:``/``gemini:``), is the agent's model; else ``--model``.
- **tests** (and ``defaultTest``): ``vars`` are a case's input, ``description`` its name;
  ``defaultTest``'s assertions are the suite's criteria, a test's own are its case's.
- **assertions**: ``equals`` exact; ``contains``/``icontains`` (and ``contains-all``)
  contains; ``contains-any``/``icontains-any`` contains_any; ``not-contains``/
  ``not-icontains`` not_contains; ``regex``; ``starts-with`` a regex; ``is-json`` a
  json_schema check (its value the schema); ``llm-rubric`` and ``model-graded-closedqa``
  LLM criteria (a ``threshold`` the pass mark on 0-100); ``cost`` cost_within;
  ``latency`` max_latency (ms to s). A ``weight`` is kept.
- **listed, never dropped silently**: ``javascript``, ``python``, ``contains-json``,
  ``similar`` and every other type, a negated form cycle has no check for, tests from a
  file other than YAML, prompts that are not text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.errors import ConfigError

_PROVIDERS = {"openai": "openai", "google": "gemini", "vertex": "gemini", "gemini": "gemini"}


class Converted(Struct):
    name: str
    prompt: str
    system: str = ""
    model: str | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)
    criteria: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)


def _file(base: Path, ref: str, what: str) -> str:
    path = base / ref.removeprefix("file://")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{what} {ref}: cannot read it ({e.strerror})", file=str(path)) from None


def _model(provider: Any) -> str | None:
    ident = provider.get("id") if isinstance(provider, dict) else provider
    if not isinstance(ident, str) or ":" not in ident:
        return None
    parts = ident.split(":")
    mapped = _PROVIDERS.get(parts[0])
    if mapped is None:
        return None
    return f"{mapped}:{parts[-1]}" if parts[-1] else None  # openai:chat:gpt-4o -> openai:gpt-4o


def convert(doc: dict[str, Any], base: Path, *, name: str, prompt_index: int = 0,
            source: str | None = None, line: int | None = None) -> Converted:
    """``doc``: the config's data, its files relative to ``base``; ``source`` and ``line``:
    where its ``prompts`` are, for an error."""
    prompts = doc.get("prompts")
    if isinstance(prompts, str):
        prompts = [prompts]
    if not isinstance(prompts, list) or not prompts:
        raise ConfigError("no prompts in the config", file=source, field="prompts")
    if not 0 <= prompt_index < len(prompts):
        raise ConfigError(f"the config has {len(prompts)} prompts", field="--prompt")
    chosen = prompts[prompt_index]
    text: str | None = None
    if isinstance(chosen, dict):
        chosen = chosen.get("raw") or chosen.get("id")
    if isinstance(chosen, str) and chosen.startswith("file://"):
        if chosen.endswith((".txt", ".md", ".j2", ".prompt")):
            text = _file(base, chosen, "prompt")
    elif isinstance(chosen, str):
        text = chosen
    if text is None:
        raise ConfigError(f"prompt {prompt_index + 1} ({str(chosen)[:60]!r}) is not text cycle "
                          "can read (a chat JSON, a script)", file=source, line=line,
                          field="prompts", hint="Choose a text prompt with --prompt N.")
    out = Converted(name=name, prompt=text.strip())
    others = len(prompts) - 1
    if others:
        out.gaps.append(f"{others} other prompt(s): a cycle project improves one; import again "
                        "with --prompt N for another")
    providers = doc.get("providers")
    providers = [providers] if isinstance(providers, (str, dict)) else providers or []
    _shape(providers, list, "providers", "a list of providers (or one)", source)
    if providers:
        out.model = _model(providers[0])
        if out.model is None:
            out.gaps.append(f"provider {providers[0]!r}: not one cycle has (the --model is used)")
        if len(providers) > 1:
            out.gaps.append(f"{len(providers) - 1} other provider(s): compare models with "
                            "cycle run --agent MODEL")
    default = doc.get("defaultTest") or {}
    if isinstance(default, str):
        out.gaps.append(f"defaultTest {default}: a file, not read")
        default = {}
    _shape(default, dict, "defaultTest", "a mapping (vars, assert)", source)
    _shape(default.get("assert") or [], list, "defaultTest.assert", "a list of assertions",
           source)
    _shape(default.get("vars") or {}, dict, "defaultTest.vars", "a mapping of variables", source)
    for n, a in enumerate(default.get("assert") or []):
        criterion = _criterion(a, f"default_{n + 1}", out.gaps, "defaultTest")
        if criterion is not None:
            out.criteria.append(criterion)
    tests = doc.get("tests") or []
    if isinstance(tests, str):
        if tests.endswith((".yaml", ".yml")):
            from cycle.yamlload import parse_yaml, read_text

            path = base / tests.removeprefix("file://")
            tests = parse_yaml(read_text(path), str(path)).data or []
        else:
            out.gaps.append(f"tests {tests}: only YAML test files are read (CSV, scripts, "
                            "datasets are not)")
            tests = []
    _shape(tests, list, "tests", "a list of tests (or a YAML file of them)", source)
    defaults = dict(default.get("vars") or {})
    for i, test in enumerate(tests):
        if not isinstance(test, dict):
            out.gaps.append(f"test {i + 1}: not a mapping")
            continue
        _shape(test.get("vars") or {}, dict, f"tests[{i}].vars", "a mapping of variables", source)
        _shape(test.get("assert") or [], list, f"tests[{i}].assert", "a list of assertions",
               source)
        variables = {**defaults, **(test.get("vars") or {})}
        case: dict[str, Any] = {"id": f"test-{i + 1:03d}", "input": variables}
        if test.get("description"):
            case["name"] = str(test["description"])
        own = []
        for n, a in enumerate(test.get("assert") or []):
            criterion = _criterion(a, f"test_{i + 1}_{n + 1}", out.gaps, f"test {i + 1}")
            if criterion is not None:
                own.append(criterion)
        if own:
            case["criteria"] = own
        out.cases.append(case)
    if not out.cases:
        out.gaps.append("no tests: add cases")
    return out


def _shape(value: Any, kind: type, field: str, shape: str, source: str | None) -> None:
    """``value`` is a ``kind``, else a ConfigError naming the field (a wrong shape was an
    internal error: ``'int' object is not iterable``)."""
    if not isinstance(value, kind):
        raise ConfigError(f"expected {shape}, got {type(value).__name__} {str(value)[:60]!r}",
                          file=source, field=field)


def _criterion(a: Any, cid: str, gaps: list[str], where: str) -> dict[str, Any] | None:
    if not isinstance(a, dict) or not isinstance(a.get("type"), str):
        gaps.append(f"{where}: an assertion that is not a mapping with a type")
        return None
    kind, value = a["type"], a.get("value")
    cid = str(a.get("metric") or cid)
    cid = re.sub(r"[^A-Za-z0-9_-]+", "_", cid).strip("_") or "assertion"
    out: dict[str, Any] = {"id": cid}
    if a.get("weight") is not None:
        out["weight"] = a["weight"]
    values = value if isinstance(value, list) else [value] if value is not None else []
    texts = [str(v) for v in values]
    check: dict[str, Any] | None = None
    if kind == "equals" and value is not None:
        check = {"type": "exact", "value": str(value)}
    elif kind in ("contains", "icontains", "contains-all", "icontains-all") and texts:
        check = {"type": "contains", "values": texts, "case_sensitive": not kind.startswith("i")}
    elif kind in ("contains-any", "icontains-any") and texts:
        check = {"type": "contains_any", "values": texts,
                 "case_sensitive": not kind.startswith("i")}
    elif kind in ("not-contains", "not-icontains") and texts:
        check = {"type": "not_contains", "values": texts, "case_sensitive": kind == "not-contains"}
    elif kind == "regex" and value is not None:
        check = {"type": "regex", "pattern": str(value)}
    elif kind == "starts-with" and value is not None:
        check = {"type": "regex", "pattern": "^" + re.escape(str(value))}
    elif kind == "is-json":
        check = {"type": "json_schema", "schema": value if isinstance(value, dict) else {}}
    elif kind == "cost" and isinstance(a.get("threshold"), (int, float)):
        check = {"type": "cost_within", "usd": float(a["threshold"])}
    elif kind == "latency" and isinstance(a.get("threshold"), (int, float)):
        check = {"type": "max_latency", "seconds": float(a["threshold"]) / 1000}
    elif kind in ("llm-rubric", "model-graded-closedqa") and value is not None:
        rubric = str(value) if kind == "llm-rubric" else (
            f"The answer meets this criterion: {value}. It passes or fails; nothing between.")
        out["rubric"] = rubric
        if isinstance(a.get("threshold"), (int, float)):
            out["pass_mark"] = round(100 * float(a["threshold"]), 2)
        return out
    if check is None:
        gaps.append(f"{where}: assertion {kind!r} is not converted"
                    + (" (it runs code)" if kind in ("javascript", "python") else ""))
        return None
    out["check"] = check
    return out
