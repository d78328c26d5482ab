"""promptfoo configs in: a ``promptfooconfig.yaml`` becomes a cycle project
(``cycle import promptfoo``).

- **prompts** (numbered as promptfoo lists them: a ``.txt`` file split at its ``---``
  lines, a mapping of prompt to label, a ``file://`` glob): the first becomes the prompt (a string is its user template, promptfoo's
  ``{{var}}`` being cycle's; ``file://x.txt`` is read beside the config; ``{raw: ...}``
  too); every other prompt is listed (a cycle project improves one prompt: import it
  again with ``--prompt N`` for another).
- **providers**: the first, when cycle knows its provider (``openai:``, ``openai:chat:``,
  ``google:``/``vertex:``/``gemini:``), is the agent's model; else ``--model``.
- **tests** (and ``defaultTest``): ``vars`` are a case's input, ``description`` its name;
  ``defaultTest``'s assertions are the suite's criteria, a test's own are its case's. As
  promptfoo reads them: ``tests`` (or an entry of it) may be a ``file://`` YAML or CSV file
  or glob (a CSV's columns are vars, its ``__expected`` cells assertions as strings,
  ``icontains: x``); a ``file://`` text var is the file's content; a var given as a list
  is one case per value (every combination).
- **assertions**: ``equals`` exact; ``contains``/``icontains`` (and ``contains-all``)
  contains; ``contains-any``/``icontains-any`` contains_any; ``not-contains``/
  ``not-icontains`` not_contains; ``regex``; ``starts-with`` a regex; ``is-json`` a
  json_schema check (its value the schema); ``llm-rubric`` and ``model-graded-closedqa``
  LLM criteria (a ``threshold`` the pass mark on 0-100); ``cost`` cost_within;
  ``latency`` max_latency (ms to s). A ``weight`` is kept.
- **code**: ``python`` assertions run the config's code as promptfoo does (python checks
  of the ``promptfoo_checks.py`` written beside cycle.yaml; ``cycle.formats.promptfoo_checks``);
  ``javascript`` converts where cycle checks the same thing exactly (``output.includes``,
  ``startsWith``, ``endsWith``, ``toLowerCase().includes``, ``output.length``), else the
  import is refused naming the file, test and assertion; so is ``similar`` (no embeddings).
- **listed, never dropped silently**: ``contains-json`` and every other type, a negated form cycle has no check for, an assertion
  with a ``transform``, a test's or ``defaultTest``'s ``options`` (transform, prefix,
  grading provider), ``scenarios``, tests from a script or a dataset, a var from
  a file that is not text (the test is skipped), prompts that are not text.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.errors import ConfigError
from cycle.formats import NotConverted

_PROVIDERS = {"openai": "openai", "google": "gemini", "vertex": "gemini", "gemini": "gemini"}


class Converted(Struct):
    name: str
    prompt: str
    #: the config's file name, for the module of its code assertions
    source: str = "the promptfoo config"
    system: str = ""
    model: str | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)
    criteria: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    #: promptfoo's code assertions as cycle checks: the name of each in the module written
    #: beside cycle.yaml (``promptfoo_checks.py``) and the Python that makes it
    code: dict[str, str] = field(default_factory=dict)

    def checks_module(self) -> str | None:
        """The module of the converted code assertions, None when there is none."""
        if not self.code:
            return None
        head = (f'"""promptfoo\'s code assertions of {self.source}, as cycle checks (written by\n'
                "cycle import promptfoo; cycle.yaml's python checks name them).\n\n"
                "A python assertion is the config's own code: it runs in cycle's process, with\n"
                "your permissions, whenever cycle judges a case, as promptfoo ran it. Read it as\n"
                'you would read any code you run.\n"""\n\n'
                "import json\nfrom pathlib import Path\n\n"
                "from cycle.formats import promptfoo_checks as pf\n\n"
                "HERE = Path(__file__).resolve().parent\n"
                f"PROMPT = {self.prompt!r}\n\n")
        return head + "".join(f"{name} = {expr}\n" for name, expr in self.code.items())


CHECKS_MODULE = "promptfoo_checks"


def _file(base: Path, ref: str, what: str) -> str:
    return _read(base / ref.removeprefix("file://"), ref, what)


def _read(path: Path, ref: str, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{what} {ref}: cannot read it ({e.strerror})", file=str(path)) from None


def _prompts(given: Any, base: Path, source: str | None) -> list[tuple[str, str | None]]:
    """The config's prompts as promptfoo lists them: (what names it, its text, None when it
    is not text): a string, a list, or a mapping of prompt to label; a ``file://`` glob one
    prompt a file, a ``.txt`` file split at its ``---`` lines into several."""
    if isinstance(given, str):
        given = [given]
    elif isinstance(given, dict):
        given = list(given)  # {file://a.txt: label}: the keys are the prompts
    if not isinstance(given, list):
        return []
    out: list[tuple[str, str | None]] = []
    for entry in given:
        if isinstance(entry, dict):
            entry = entry.get("raw") or entry.get("id")
        if not isinstance(entry, str) or not entry.startswith("file://"):
            out.append((str(entry), entry if isinstance(entry, str) else None))
            continue
        ref = entry.removeprefix("file://")
        paths = sorted(base.glob(ref)) if any(c in ref for c in "*?[") else [base / ref]
        if not paths:
            raise ConfigError(f"prompt {entry}: no file matches it", file=source,
                              field="prompts")
        for path in paths:
            name = f"file://{path.relative_to(base)}" if path.is_relative_to(base) else entry
            if path.suffix == ".txt":  # promptfoo's text prompts: one per part between ---
                chunks: list[list[str]] = [[]]
                for row in _read(path, name, "prompt").splitlines():
                    if row.strip() == "---":
                        chunks.append([])
                    else:
                        chunks[-1].append(row)
                out += [(name, text) for c in chunks if (text := "\n".join(c).strip())]
            elif path.suffix in (".md", ".j2", ".prompt"):
                out.append((name, _read(path, name, "prompt")))
            else:
                out.append((name, None))
    return out


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
            source: str | None = None, line: int | None = None,
            project: Path | None = None) -> Converted:
    """``doc``: the config's data, its files relative to ``base``; ``source`` and ``line``:
    where its ``prompts`` are, for an error; ``project``: the folder the project is written
    to (its code assertions name the config's Python files relative to it)."""
    prompts = _prompts(doc.get("prompts"), base, source)
    if not prompts:
        raise ConfigError("no prompts in the config", file=source, field="prompts")
    if not 0 <= prompt_index < len(prompts):
        raise ConfigError(f"the config has {len(prompts)} prompts", field="--prompt")
    chosen, text = prompts[prompt_index]
    if text is None:
        raise ConfigError(f"prompt {prompt_index + 1} ({str(chosen)[:60]!r}) is not text cycle "
                          "can read (a chat JSON, a script)", file=source, line=line,
                          field="prompts", hint="Choose a text prompt with --prompt N.")
    out = Converted(name=name, prompt=_jinja(text.strip()),
                    source=Path(source).name if source else "the promptfoo config")
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
        at = _At(out, base, project, source or "the config", "defaultTest", default, n + 1,
                 f"default_{n + 1}")
        criterion = _criterion(a, f"default_{n + 1}", out.gaps, "defaultTest", at)
        if criterion is not None:
            out.criteria.append(_unique(criterion, {c["id"] for c in out.criteria}))
    if doc.get("scenarios"):
        out.gaps.append("scenarios: not converted (their configs and tests make no cases)")
    for key in ("options", "transform"):
        if isinstance(default, dict) and default.get(key):
            out.gaps.append(_options_gap("defaultTest", key, default[key]))
    tests = _tests(doc.get("tests") or [], base, out.gaps, source)
    defaults = dict(default.get("vars") or {})
    for i, test in enumerate(tests):
        where = f"test {i + 1}"
        if not isinstance(test, dict):
            out.gaps.append(f"{where}: not a mapping")
            continue
        _shape(test.get("vars") or {}, dict, f"tests[{i}].vars", "a mapping of variables", source)
        _shape(test.get("assert") or [], list, f"tests[{i}].assert", "a list of assertions",
               source)
        for key in ("options", "transform"):
            if test.get(key):
                out.gaps.append(_options_gap(where, key, test[key]))
        if test.get("threshold") is not None:
            out.gaps.append(f"{where}: threshold {test['threshold']} (its assertions' weighted "
                            "score to pass) not converted: each criterion passes on its own")
        variables = _variables({**defaults, **(test.get("vars") or {})}, base, where, out.gaps)
        if variables is None:
            continue
        own = []
        label = where + (f" ({str(test['description'])[:60]!r})" if test.get("description")
                         else "")
        for n, a in enumerate(test.get("assert") or []):
            at = _At(out, base, project, str(test.get("\0file") or source or "the config"),
                     label, test, n + 1, f"test_{i + 1}_{n + 1}")
            criterion = _criterion(a, f"test_{i + 1}_{n + 1}", out.gaps, where, at)
            if criterion is not None:
                # a case's criterion of a suite's id would replace it: each is its own
                own.append(_unique(criterion, {c["id"] for c in [*out.criteria, *own]}))
        for k, values in enumerate(variables):
            # a var given as a list is one test per value, as promptfoo runs it
            suffix = f"-{k + 1}" if len(variables) > 1 else ""
            case: dict[str, Any] = {"id": f"test-{i + 1:03d}{suffix}", "input": values}
            if test.get("description"):
                case["name"] = str(test["description"]) + (f" ({k + 1})" if suffix else "")
            if own:
                case["criteria"] = copy.deepcopy(own)
            out.cases.append(case)
    if not out.cases:
        out.gaps.append("no tests: add cases")
    if not out.criteria:
        # cycle.yaml needs a criterion of its own (the cases' are added to it): without
        # one the project did not load ("criteria: List should have at least 1 item")
        out.criteria.append({"id": "answered", "description": "The answer is not empty",
                             "check": {"type": "regex", "pattern": r"\S"}})
        out.gaps.append("no defaultTest assertion: cycle.yaml's one criterion is 'answered' "
                        "(the answer is not empty), beside each test's own; replace it with "
                        "what every case should meet")
    return out


_TEXT_FILES = (".txt", ".md", ".json", ".html", ".xml", ".csv", ".j2", ".prompt")


def _options_gap(where: str, key: str, value: Any) -> str:
    keys = ", ".join(map(str, value)) if isinstance(value, dict) else str(value)[:60]
    return (f"{where}: {key} ({keys}) not converted: cycle checks the agent's own output "
            "with its own judge")


def _variables(variables: dict[str, Any], base: Path, where: str,
               gaps: list[str]) -> list[dict[str, Any]] | None:
    """A test's variables as promptfoo reads them: a ``file://`` text file's content in
    place of its name, and a list one test per value (every combination); None, with a
    gap, when a variable is a file cycle cannot read as text (a script, an image)."""
    import itertools

    read: dict[str, list[Any]] = {}
    for key, value in variables.items():
        values = value if isinstance(value, list) else [value]
        texts = []
        for v in values:
            if isinstance(v, str) and v.startswith("file://"):
                if not v.lower().endswith(_TEXT_FILES):
                    gaps.append(f"{where}: var {key} is {v}, not a text file cycle reads "
                                "(a script, an image or a document): the test is not converted")
                    return None
                v = _file(base, v, f"{where}: var {key}").rstrip()
            texts.append(v)
        read[key] = texts
    if not read:
        return [{}]
    return [dict(zip(read, combo, strict=True)) for combo in itertools.product(*read.values())]


def _tests(tests: Any, base: Path, gaps: list[str], source: str | None) -> list[Any]:
    """The tests as promptfoo reads ``tests``: inline, a ``file://`` YAML, CSV, JSON or JSONL
    file or glob (also as an entry of the list); any other source is listed as a gap."""
    if isinstance(tests, str):
        tests = [tests]
    _shape(tests, list, "tests", "a list of tests (or a YAML or CSV file of them)", source)
    out: list[Any] = []
    for entry in tests:
        if not isinstance(entry, str):
            out.append(entry)
            continue
        ref = entry.removeprefix("file://")
        paths = sorted(base.glob(ref)) if any(c in ref for c in "*?[") else [base / ref]
        if not ref.endswith((".yaml", ".yml", ".csv", ".json", ".jsonl")) or not paths:
            gaps.append(f"tests {entry}: only YAML, CSV, JSON and JSONL test files are read "
                        "(scripts and datasets are not)" if paths else
                        f"tests {entry}: no such file")
            continue
        for path in paths:
            if path.suffix == ".csv":
                out.extend(_from(t, path) for t in _csv_tests(path, gaps))
                continue
            from cycle.yamlload import parse_json_text, parse_yaml, read_text

            text = read_text(path)
            if path.suffix == ".jsonl":
                for n, row in enumerate(text.splitlines(), 1):
                    if row.strip():
                        out.append(_from(_json_line(row, path, n), path))
                continue
            data = (parse_json_text(text, str(path)) if path.suffix == ".json"
                    else parse_yaml(text, str(path)).data) or []
            out.extend(_from(t, path) for t in (data if isinstance(data, list) else [data]))
    return out


def _from(test: Any, path: Path) -> Any:
    """A test read from ``path``, marked with it (a refusal names the file)."""
    return {**test, "\0file": str(path)} if isinstance(test, dict) else test


def _json_line(row: str, path: Path, n: int) -> Any:
    import json

    try:
        return json.loads(row)
    except ValueError as e:
        raise ConfigError(f"not JSON: {e}", file=str(path), line=n) from None
    except RecursionError:
        from cycle.yamlload import too_deep

        raise too_deep(str(path), "JSON", n) from None


def _csv_tests(path: Path, gaps: list[str]) -> list[dict[str, Any]]:
    """promptfoo's CSV tests: a column a variable; ``__expected`` (``__expected1``...)
    assertions as strings (``icontains: x``, ``llm-rubric: ...``, else equals),
    ``__description`` the name; other ``__`` columns are listed."""
    import csv

    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise ConfigError(f"tests {path.name}: cannot read it ({e.strerror})",
                          file=str(path)) from None
    tests = []
    for row in rows:
        test: dict[str, Any] = {"vars": {}, "assert": []}
        for key, value in row.items():
            if key is None or value is None:
                continue
            if key.startswith("__expected"):
                if value.strip():
                    test["assert"].append(_assertion_from_string(value))
            elif key == "__description":
                test["description"] = value
            elif key.startswith("__"):
                if value.strip():
                    gaps.append(f"tests {path.name}: column {key} not converted")
            else:
                test["vars"][key] = value
        tests.append(test)
    return tests


_STRING_ASSERTION = re.compile(
    r"^(not-)?(equals|contains-any|contains-all|icontains-any|icontains-all|contains-json|"
    r"is-json|is-sql|is-xml|regex|icontains|contains|starts-with|similar|levenshtein|"
    r"rouge-n|bleu|classifier|cost|latency|perplexity|model-graded-closedqa|"
    r"model-graded-factuality|factuality|answer-relevance|llm-rubric)"
    r"(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")


def _assertion_from_string(text: str) -> dict[str, Any]:
    """A CSV ``__expected`` cell as promptfoo reads it: ``TYPE(THRESHOLD): VALUE``, code
    after ``javascript:``/``fn:``/``eval:`` or ``python:``, a rubric after ``grade:``;
    anything else is the output it must equal."""
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"),
                         ("eval:", "javascript"), ("python:", "python"),
                         ("grade:", "llm-rubric"), ("llm-rubric:", "llm-rubric")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix):].strip()}
    m = _STRING_ASSERTION.match(text)
    if m is None:
        return {"type": "equals", "value": text}
    negate, kind, threshold, value = m.groups()
    out: dict[str, Any] = {"type": (negate or "") + kind}
    if value is not None and value.strip():
        value = value.strip()
        out["value"] = [v.strip() for v in value.split(",")] if kind in (
            "contains-any", "contains-all", "icontains-any", "icontains-all") else value
    if threshold is not None:
        out["threshold"] = float(threshold)
    return out


_DUMP = re.compile(r"\|\s*dump\b")


def _jinja(text: str) -> str:
    """promptfoo's Nunjucks template as Jinja: the filters they share are alike, and
    Nunjucks' ``dump`` (JSON) is Jinja's ``tojson`` (a prompt with it did not compile)."""
    return _DUMP.sub("| tojson", text)


def _unique(criterion: dict[str, Any], used: set[str]) -> dict[str, Any]:
    """``criterion`` with an id not in ``used``: promptfoo's ``metric`` names a score that
    several assertions add to, cycle's id one criterion (``tone``, ``tone_2``...)."""
    base, n = criterion["id"], 2
    while criterion["id"] in used:
        criterion["id"], n = f"{base}_{n}", n + 1
    return criterion


def _shape(value: Any, kind: type, field: str, shape: str, source: str | None) -> None:
    """``value`` is a ``kind``, else a ConfigError naming the field (a wrong shape was an
    internal error: ``'int' object is not iterable``)."""
    if not isinstance(value, kind):
        raise ConfigError(f"expected {shape}, got {type(value).__name__} {str(value)[:60]!r}",
                          file=source, field=field)


class _At(Struct):
    """Where an assertion is: its project, the file and test it is in, its number."""

    out: Converted
    base: Path
    project: Path | None
    file: str
    test_label: str
    test: dict[str, Any]
    number: int
    key: str

    def said(self, a: dict[str, Any], why: str) -> str:
        value = str(a.get("value"))
        shown = value if len(value) <= 80 and "\n" not in value else value[:77].split("\n")[0] + "..."
        return f"{self.test_label}, assertion {self.number} ({a['type']}: {shown}): {why}"

    def refuse(self, a: dict[str, Any], why: str, fix: str) -> ConfigError:
        """The import's error: what the assertion names cannot be read (a missing file)."""
        return ConfigError(self.said(a, why), file=self.file, hint=fix + " Then import again.")

    def skip(self, a: dict[str, Any], why: str, fix: str) -> NotConverted:
        """An assertion cycle cannot check as promptfoo does: listed with what was not
        converted (at cycle.yaml's top and on the console), as a transform is, and the rest
        imported; never approximated."""
        return NotConverted(f"{Path(self.file).name}: {self.said(a, why)}. {fix}")


def _criterion(a: Any, cid: str, gaps: list[str], where: str,
               at: _At | None = None) -> dict[str, Any] | None:
    if not isinstance(a, dict) or not isinstance(a.get("type"), str):
        gaps.append(f"{where}: an assertion that is not a mapping with a type")
        return None
    kind, value = a["type"], a.get("value")
    if at is not None and (kind in ("similar", "not-similar") or kind.startswith("similar:")):
        gaps.append(str(at.skip(
            a, "not converted: cycle has no embedding similarity check (and does not "
            "approximate one)", "Rewrite it as an llm-rubric (e.g. 'says the same as: ...') "
            "or another assertion cycle converts.")))
        return None
    for key in ("provider", "rubricPrompt"):
        if a.get(key):
            gaps.append(f"{where}: assertion {kind!r}: its {key} not converted (cycle's judge "
                        "grades it with cycle's rubric prompt)")
    if a.get("transform"):
        gaps.append(f"{where}: assertion {kind!r} has a transform ({str(a['transform'])[:60]}): "
                    "not converted (cycle checks the output as it is)")
        return None
    cid = str(a.get("metric") or cid)
    cid = re.sub(r"[^A-Za-z0-9_-]+", "_", cid).strip("_") or "assertion"
    out: dict[str, Any] = {"id": cid}
    if a.get("weight") is not None:
        out["weight"] = a["weight"]
    if isinstance(value, str):
        value = _jinja(value)
    elif isinstance(value, list):
        value = [_jinja(v) if isinstance(v, str) else v for v in value]
    values = value if isinstance(value, list) else [value] if value is not None else []
    texts = [str(v) for v in values]
    check: dict[str, Any] | None = None
    if at is not None and kind in ("python", "not-python"):
        out["check"] = {"type": "python", "function": _python(a, value, at)}
        return out
    if at is not None and kind in ("javascript", "not-javascript"):
        try:
            out["check"] = _javascript(a, value, at)
        except NotConverted as e:
            gaps.append(str(e))
            return None
        return out
    if kind == "equals" and isinstance(value, (dict, list)):
        # promptfoo compares the output parsed as JSON with an object or a list
        check = {"type": "json_schema", "schema": {"const": value}}
    elif kind == "equals" and value is not None:
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
    elif kind == "starts-with" and ("{{" in str(value) or "{%" in str(value)):
        gaps.append(f"{where}: assertion 'starts-with' with a template ({str(value)[:60]}) is "
                    "not converted (as a pattern, the variable would be read as a regular "
                    "expression)")
        return None
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


def _threshold(a: dict[str, Any]) -> float | None:
    t = a.get("threshold")
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None


def _python(a: dict[str, Any], value: Any, at: _At) -> str:
    """A ``python`` assertion as an entry of the checks module; its import path."""
    import ast
    import json
    import os

    if not isinstance(value, str) or not value.strip():
        raise at.refuse(a, "a python assertion needs its code (or file://x.py) as its value",
                        "Give the code as the assertion's value.")
    test = {k: v for k, v in at.test.items() if isinstance(k, str) and not k.startswith("\0")}
    common = (f"threshold={_threshold(a)!r}, inverse={a['type'].startswith('not-')!r}, "
              f"prompt=PROMPT, test=json.loads({json.dumps(test, default=str)!r}), "
              f"config=json.loads({json.dumps(a.get('config'), default=str)!r})")
    if value.startswith("file://"):
        ref = value.removeprefix("file://")
        path, function = (ref, "get_assert") if ref.endswith(".py") else ref.rpartition(":")[::2]
        if not path.endswith(".py") or not function:
            raise at.refuse(a, "not a Python file (file://path/to/check.py, or "
                            "file://path/to/check.py:function)",
                            "Name a .py file beside the config.")
        file = at.base / path
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
        except OSError as e:
            raise at.refuse(a, f"cannot read {file} ({e.strerror})",
                            "Put the file where the config names it.") from None
        except SyntaxError as e:
            raise at.refuse(a, f"{file} does not compile: {e.msg} (line {e.lineno})",
                            "Fix the file.") from None
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name)}
        if function not in names:
            raise at.refuse(a, f"{file.name} defines no function {function}",
                            f"Define {function}(output, context) in it, or name the function "
                            "as file://path.py:function.")
        where = (Path(os.path.relpath(file.resolve(), at.project.resolve())).as_posix()
                 if at.project is not None else str(file.resolve()))
        expr = f"pf.python_file(HERE / {where!r}, {function!r}, {common})"
    else:
        expr = f"pf.python_inline({value!r}, {common})"
    at.out.code[at.key] = expr
    return f"{CHECKS_MODULE}:{at.key}"


_JS_TEXT = r"""'(?:[^'\\\n]|\\['"\\nt])*'|"(?:[^"\\\n]|\\['"\\nt])*"|`[^`\\$\n]*`"""
_JS_CALL = re.compile(r"(!?)\s*output\.(includes|toLowerCase\(\)\.includes|startsWith|endsWith)"
                      rf"\(\s*({_JS_TEXT})\s*\)")
_JS_LENGTH = re.compile(r"output\.length\s*(<=|>=|<|>|===|!==)\s*(\d+(?:\.\d+)?)")
_JS_SUBSET = ("output.includes('x'), output.toLowerCase().includes('x'), "
              "output.startsWith('x'), output.endsWith('x') (each also with !), and "
              "output.length compared with a number")


def _js_text(literal: str) -> str:
    """A JavaScript string literal's text (the escapes the subset allows)."""
    escapes = {"n": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: escapes[m[1]], literal[1:-1])


def _javascript(a: dict[str, Any], value: Any, at: _At) -> dict[str, Any]:
    """A ``javascript`` assertion cycle can check exactly, as a check; else not converted
    (``NotConverted``)."""
    code = value.strip().removesuffix(";").strip() if isinstance(value, str) else ""
    inverse = a["type"].startswith("not-")
    call, length = _JS_CALL.fullmatch(code), _JS_LENGTH.fullmatch(code)
    why = ("cycle runs no JavaScript; it converts exactly only " + _JS_SUBSET)
    fix = ("Rewrite it as a python assertion (the same test in Python) or as a built-in "
           "assertion (contains, icontains, regex, starts-with...).")
    if isinstance(value, str) and value.startswith("file://"):
        raise at.skip(a, "not converted: a JavaScript file; " + why, fix)
    if length is not None:
        at.out.code[at.key] = (f"pf.js_length({length[1]!r}, {float(length[2])!r}, "
                               f"inverse={inverse!r})")
        return {"type": "python", "function": f"{CHECKS_MODULE}:{at.key}"}
    if call is None:
        raise at.skip(a, "not converted: " + why, fix)
    negate, method, text = bool(call[1]) != inverse, call[2], _js_text(call[3])
    templated = "{{" in text or "{%" in text
    if method == "includes":  # promptfoo renders the value with the vars, as cycle does
        return {"type": "not_contains" if negate else "contains", "values": [text],
                "case_sensitive": True}
    if templated:
        raise at.skip(a, "not converted: a variable in this call (it would be read as a "
                      "pattern)", fix)
    if method == "toLowerCase().includes":
        at.out.code[at.key] = f"pf.js_lower_includes({text!r}, inverse={negate!r})"
        return {"type": "python", "function": f"{CHECKS_MODULE}:{at.key}"}
    escaped = re.escape(text)
    if method == "startsWith":
        pattern = rf"\A(?!{escaped})" if negate else rf"\A{escaped}"
    else:
        pattern = rf"(?<!{escaped})\Z" if negate else rf"{escaped}\Z"
    return {"type": "regex", "pattern": pattern}
