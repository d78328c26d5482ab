"""OpenAI Evals files in: a JSONL of items and, optionally, the graders (``testing_criteria``)
become a cycle project (``cycle import openai-evals``).

Items: one JSON object a line, the hosted Evals' ``{"item": {...}}`` or the item itself
(openai/evals' registry lines). Its ``input`` (a string, or chat messages) or ``messages``
is what the agent is asked: a shared system message becomes the prompt's system, one that
varies a case variable; the last user message is the case's ``question``. Every other
scalar field of the item is a case variable (``{{item.ideal}}`` in a grader is ``{{ ideal
}}``), and ``ideal`` (or ``reference``, ``expected``, ``answer``; the first of a list) is
the case's ``expected``.

Without graders, or with the openai/evals registry YAML that defines the eval (``--graders
registry/evals/NAME.yaml``), each case is judged as the eval's class judges a sample:
``Match`` passes when the answer starts with one of the ideal answers, ``Includes`` when it
contains one (``ignore_case`` kept), ``FuzzyMatch`` when, normalized as openai/evals does,
one contains the other (``cycle.formats.openai_evals_checks``); ``ModelBasedClassify`` is an
LLM criterion carrying its modelgraded spec's prompt and choice scores (the spec read from
``registry/modelgraded/``; refused when the spec is missing, listed as not converted when
it scores no choice or grades several completions); other classes are listed.

Graders: ``string_check`` (``eq`` an exact match, ``like``/``ilike`` a contains check) on
``{{sample.output_text}}``; ``score_model`` and ``label_model`` become LLM criteria whose
rubric is the grader's prompt (its pass threshold the pass mark, on 0-100). What cannot
be converted (``text_similarity``, ``python``, ``multi``, a ``ne`` string check, earlier
turns of a multi-turn input, a list of ideal answers read by a grader) is listed, never
dropped silently.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from cycle.errors import ConfigError
from cycle.formats import NotConverted
from cycle.yamlload import parse_json_text, read_text, too_deep

_REFERENCE_FIELDS = ("ideal", "reference", "expected", "answer")
_EXAMPLE_NAMES = {"example_user": "User: ", "example_assistant": "Assistant: "}
_ITEM = re.compile(r"\{\{\s*item\.([A-Za-z_]\w*)\s*\}\}")
_SAMPLE = re.compile(r"\{\{\s*sample\.output_text\s*\}\}")


class Converted(Struct):
    """A project's parts: the prompt, the cases, the criteria, and what was left out."""

    name: str
    system: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    criteria: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    #: the system message differs between items: it is a case variable
    system_varies: bool = False


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def read_items(path: Path) -> list[dict[str, Any]]:
    """The items of a JSONL file; a bad line is a ConfigError naming it."""
    text = read_text(path)
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise ConfigError(f"not JSON: {e}", file=str(path), line=n) from None
        except RecursionError:
            raise too_deep(str(path), "JSON", n) from None
        item = row.get("item", row) if isinstance(row, dict) else None
        if not isinstance(item, dict):
            raise ConfigError("a line is one JSON object (an item, or {\"item\": {...}})",
                              file=str(path), line=n)
        items.append({**item, "\0line": n})
    if not items:
        raise ConfigError("no items in the file", file=str(path))
    return items


def read_graders(path: Path, items: Path | None = None) -> list[dict[str, Any]]:
    """The graders of a JSON file: a list, or an eval's ``testing_criteria``; of a YAML
    file, the openai/evals registry eval it defines (for the ``items`` file)."""
    if path.suffix in (".yaml", ".yml"):
        return read_registry_eval(path, items)
    data = parse_json_text(read_text(path), str(path))
    graders = data.get("testing_criteria", data.get("graders")) if isinstance(data, dict) else data
    if not isinstance(graders, list) or not all(isinstance(g, dict) for g in graders):
        raise ConfigError("expected a list of graders (or an eval with testing_criteria)",
                          file=str(path))
    key = "" if isinstance(data, list) else "testing_criteria" if "testing_criteria" in data \
        else "graders"
    for n, grader in enumerate(graders):
        _check_grader(grader, where=f"{key}[{n}]", file=str(path))
    return graders


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _check_grader(grader: dict[str, Any], *, where: str, file: str) -> None:
    """A model grader's fields have the shapes the conversion reads (a range of two
    numbers, a numeric pass threshold, messages and labels as lists), else a ConfigError
    naming the field: a wrong one was an internal error (``'int' object is not iterable``)."""
    if grader.get("type") not in ("score_model", "label_model"):
        return
    fields: dict[str, tuple[bool, str]] = {
        "input": (isinstance(grader.get("input"), list), "a list of messages"),
    }
    if grader["type"] == "score_model":
        scale = grader.get("range")
        fields["range"] = (isinstance(scale, list) and len(scale) == 2
                           and all(map(_number, scale)) and scale[0] < scale[1],
                           "two numbers, the lowest score first, e.g. [0, 1]")
        fields["pass_threshold"] = (_number(grader.get("pass_threshold")), "a number")
    else:
        fields["labels"] = (isinstance(grader.get("labels"), list), "a list of labels")
        fields["passing_labels"] = (isinstance(grader.get("passing_labels"), list),
                                    "a list of labels")
    for name, (ok, shape) in fields.items():
        if name in grader and grader[name] is not None and not ok:
            raise ConfigError(f"expected {shape}, got {json.dumps(grader[name])[:80]}",
                              file=file, field=f"{where}.{name}".lstrip("."))


def convert(items: list[dict[str, Any]], graders: list[dict[str, Any]] | None, *,
            name: str, source: str) -> Converted:
    systems, lines = [], []
    multi_turn = ideal_lists = examples = system_only = 0
    for item in items:
        n = item["\0line"]
        messages = item.get("input", item.get("messages"))
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, list) or not messages:
            raise ConfigError("the item has no input (a string, or chat messages) or messages",
                              file=source, line=n, field="input")
        # openai/evals' few-shot examples are system messages named example_user and
        # example_assistant: kept in the system with the speaker, as evals writes them for
        # a text model (evals.prompt.base), not as bare lines that lost who said them
        named = [m for m in messages if isinstance(m, dict) and m.get("role") == "system"
                 and m.get("name") in _EXAMPLE_NAMES]
        examples += bool(named)
        users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
        if not users:
            # openai/evals sends the messages as they are: many registry evals (logic,
            # sql, qa...) are one system message, the task; its last is what is asked
            last = len(messages) - 1
            if not isinstance(messages[last], dict) or messages[last].get("role") not in (
                    "system", "developer") or not _text(messages[last].get("content")).strip():
                raise ConfigError("the item's input has no user message (nor a system message "
                                  "last to ask)", file=source, line=n, field="input")
            users, messages = [last], [*messages[:last], {**messages[last], "role": "user"}]
            system_only += 1
        system = "\n\n".join(_EXAMPLE_NAMES.get(m.get("name"), "") + _text(m.get("content"))
                             for m in messages
                             if isinstance(m, dict) and m.get("role") in ("system", "developer"))
        if any(m.get("role") in ("user", "assistant") for m in messages[:users[-1]]
               if isinstance(m, dict)):
            multi_turn += 1
        systems.append(system)
        lines.append((item, _text(messages[users[-1]].get("content")), system))
    varies = len(set(systems)) > 1
    out = Converted(name=name, system="{{ system }}" if varies else systems[0],
                    system_varies=varies)
    seen: set[str] = set()
    ideals: list[list[str]] = []
    for i, (item, question, system) in enumerate(lines):
        case_id = str(item.get("id") or f"item-{i + 1:04d}")
        if case_id in seen:
            case_id = f"{case_id}-{i + 1}"
        seen.add(case_id)
        variables: dict[str, Any] = {
            k: v for k, v in item.items()
            if k not in ("input", "messages", "id", "\0line") and isinstance(v, (str, int, float, bool))}
        variables["question"] = question
        if varies:
            variables["system"] = system
        case: dict[str, Any] = {"id": case_id, "input": variables}
        reference = next((item[k] for k in _REFERENCE_FIELDS if item.get(k) is not None), None)
        ideals.append([str(r) for r in reference] if isinstance(reference, list)
                      else [] if reference is None else [str(reference)])
        if isinstance(reference, list):
            ideal_lists += 1
            reference = reference[0] if reference else None
        if reference is not None:
            case["expected"] = str(reference)
            variables.setdefault("ideal", str(reference))
        out.cases.append(case)
    if multi_turn:
        out.gaps.append(f"{multi_turn} items have earlier turns in their input: only the last "
                        "user message is asked (the earlier ones are not sent)")
    if system_only:
        out.gaps.append(f"{system_only} items have no user message: their last system message "
                        "is asked as the user's (openai/evals sends it as a system message)")
    if examples:
        out.gaps.append(f"{examples} items give few-shot examples as system messages named "
                        "example_user/example_assistant: they are in the system prompt as "
                        "'User: '/'Assistant: ' lines, not as turns")
    registry = graders[0] if graders and graders[0].get("type") == "registry" else None
    if ideal_lists and (graders is not None and registry is None):
        out.gaps.append(f"{ideal_lists} items give a list of ideal answers: the first is the "
                        "expected one ({{item.ideal}} in a grader)")
    if graders is None or registry is not None:
        _registry_eval(registry, out, ideals)
    else:
        for n, grader in enumerate(graders):
            _grader(grader, n, out)
    if not out.criteria:
        out.gaps.append("no criterion could be made: cycle.yaml has none; add one")
    return out


_MATCH = "evals.elsuite.basic.match:Match"
_INCLUDES = "evals.elsuite.basic.includes:Includes"
_FUZZY = "evals.elsuite.basic.fuzzy_match:FuzzyMatch"
_CLASSIFY = "evals.elsuite.modelgraded.classify:ModelBasedClassify"


def _fuzzy_match(out: Converted, ideals: list[list[str]]) -> None:
    """FuzzyMatch: a python check of cycle's (``cycle.formats.openai_evals_checks``) that
    normalizes as openai/evals does; each case keeps every ideal answer (``ideals``)."""
    out.criteria.append({"id": "fuzzy_match", "description": "The answer and an ideal answer, "
                         "normalized, contain one another (OpenAI evals' FuzzyMatch)",
                         "check": {"type": "python", "function":
                                   "cycle.formats.openai_evals_checks:fuzzy_match"}})
    for case, answers in zip(out.cases, ideals, strict=True):
        if answers:
            case["input"]["ideals"] = answers
    if not all(ideals):
        out.gaps.append("not every item has an ideal answer: FuzzyMatch fails those cases "
                        "(openai/evals needs one in every sample)")


def _model_graded(spec: dict[str, Any]) -> dict[str, Any]:
    """ModelBasedClassify: an LLM criterion whose rubric is the modelgraded spec's grading
    prompt (its placeholders named as the judge sees them) and its choices' scores. A spec
    that cannot be read (none named, its file not here) is the import's error: import again
    once it is there. One cycle's judge cannot grade as openai/evals does (several
    completions, a chat prompt, no scores) is not converted (``NotConverted``): listed,
    with the fix, and the cases and prompt imported."""
    import string as strings

    args, file, name = spec["args"], spec.get("path"), spec["name"]
    mg_name = args.get("modelgraded_spec")
    where = f"{name} (ModelBasedClassify, modelgraded_spec {mg_name})"

    def refuse(why: str, fix: str) -> ConfigError:
        return ConfigError(f"eval {where}: {why}", file=file, field=f"{name}.args", hint=fix)

    def skip(why: str, fix: str) -> NotConverted:
        return NotConverted(f"eval {where}: {why}. {fix}")

    if not isinstance(mg_name, str):
        raise refuse("no modelgraded_spec named", "Name the spec, as openai/evals needs.")
    mg = _find_spec(mg_name, Path(file) if file else None)
    if mg is None:
        folder = Path(file).resolve().parent.parent / "modelgraded" if file else None
        raise refuse(f"its spec is not here: openai/evals defines it in "
                     f"evals/registry/modelgraded/*.yaml ({mg_name}: ...)",
                     f"Copy that file from your openai/evals checkout to {folder}/ (beside "
                     "registry/evals/), then import again.")
    prompt, scores = mg.get("prompt"), mg.get("choice_scores")
    choices = mg.get("choice_strings")
    pairs = mg.get("input_outputs") or {}
    if (args.get("multicomp_n", 1) != 1 or mg.get("output_template") or len(pairs) != 1
            or list(pairs) != ["input"]):
        raise skip("it grades several completions together (battle, best...): cycle's judge "
                     "grades one answer", "Judge it with a pairwise cycle criterion "
                     "(pairwise: true) or an LLM rubric of your own.")
    if not isinstance(prompt, str):
        raise skip("its prompt is chat messages, not one text",
                     "Write its grading prompt as an LLM rubric criterion.")
    if isinstance(choices, str) and choices.startswith("from_n"):
        raise skip(f"its choices ({choices}) come from several completions",
                     "Write an LLM rubric criterion.")
    if scores is None:
        raise skip("its spec has no choice_scores: openai/evals only counts which choice "
                     "the grader picks, so there is no score to pass on",
                     f"Add choice_scores to {mg_name} (a score for each of "
                     f"{', '.join(map(str, choices or []))}), or write an LLM rubric criterion.")
    choices = list(choices or [])
    table = ({c: float(c) for c in choices} if scores == "from_strings" else
             {str(k): float(v) for k, v in scores.items()} if isinstance(scores, dict) else None)
    if not table or len(set(table.values())) < 2 or not set(choices) <= set(table):
        raise skip(f"its choice_scores ({scores!r}) do not score every choice with at least "
                     "two scores", "Fix the spec's choice_scores.")
    low, high = min(table.values()), max(table.values())
    completion = pairs["input"]
    said = {"input": "[the task: the case's input]", completion: "[the answer being judged]",
            "ideal": "[the expected answer]"}
    text = []
    for literal, field_name, _spec, _conv in strings.Formatter().parse(prompt):
        text.append(literal)
        if field_name is not None:
            value = args.get("modelgraded_spec_args", {}).get(field_name)
            text.append(str(value) if value is not None else
                        said.get(field_name, f"[the case's {field_name}]"))
    ranked = ", ".join(f"{c} = {round(100 * (table[c] - low) / (high - low), 2):g}"
                       for c in choices)
    rubric = ("".join(text).strip() + "\n\nChoose one of " + ", ".join(f'"{c}"' for c in choices)
              + f". Score the answer by the choice: {ranked} (nothing between). If no choice "
              "fits, score it as the lowest.")
    top = [c for c in choices if table[c] == high]
    return {"id": re.sub(r"[^A-Za-z0-9_-]+", "_", mg_name).strip("_") or "modelgraded",
            "description": f"OpenAI evals' ModelBasedClassify with the {mg_name} spec; passes "
            f"on {' or '.join(top)}", "rubric": rubric, "pass_mark": 100}


def _find_spec(name: str, eval_file: Path | None) -> dict[str, Any] | None:
    """The modelgraded spec ``name``: any YAML of ``registry/modelgraded/`` beside the
    eval's ``registry/evals/`` folder (openai/evals reads them all: humor.yaml holds
    humor_likert too)."""
    import yaml

    if eval_file is None:
        return None
    folder = eval_file.resolve().parent.parent / "modelgraded"
    for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
        # read as openai/evals reads them (PyYAML: registry 3.0.1's keywords.yaml repeats a
        # key, which cycle's own loader refuses); a file that is not YAML holds no spec
        try:
            data = yaml.safe_load(read_text(path))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and isinstance(data.get(name), dict):
            return data[name]
    return None


def _registry_eval(spec: dict[str, Any] | None, out: Converted, ideals: list[list[str]]) -> None:
    """The criteria of an openai/evals registry eval (Match without one), judged as its
    class judges a sample: Match passes when the answer *starts with* one of the ideal
    answers (``record_and_check_match``), Includes when it contains one (``ignore_case``
    its arg). Each case gets its own check over all its ideal answers; the suite's one,
    for cases added by hand, reads ``expected``."""
    cls = spec["class"] if spec else _MATCH
    args = (spec or {}).get("args") or {}
    if cls == _FUZZY and spec is not None:
        _fuzzy_match(out, ideals)
        return
    if cls == _CLASSIFY and spec is not None:
        try:
            out.criteria.append(_model_graded(spec))
        except NotConverted as e:
            out.gaps.append(str(e))
        return
    if cls not in (_MATCH, _INCLUDES):
        kind = cls.rsplit(":", 1)[-1]
        spec_name = args.get("modelgraded_spec")
        out.gaps.append(f"eval {spec.get('name') if spec else ''}: class {cls}"
                        + (f" (modelgraded_spec {spec_name})" if spec_name else "")
                        + f" is not converted (cycle has no {kind} check): add criteria")
        return
    if not all(ideals):
        out.gaps.append("no graders and not every item has an ideal answer: add criteria")
        return
    if cls == _MATCH:
        # a case added by hand is judged equal to its expected answer (a suite-wide
        # pattern would read the answer as a regular expression); every imported case
        # has its own check, its ideal answers escaped
        out.criteria.append({"id": "match", "description": "The answer starts with an ideal "
                             "answer (OpenAI evals' Match)", "check": {
                                 "type": "exact", "normalize_whitespace": True}})
        for case, answers in zip(out.cases, ideals, strict=True):
            pattern = r"\A(?:" + "|".join(re.escape(a) for a in answers) + ")"
            case["criteria"] = [{"id": "match", "check": {"type": "regex", "pattern": pattern}}]
        return
    sensitive = not args.get("ignore_case", False)
    out.criteria.append({"id": "includes", "description": "The answer contains an ideal "
                         "answer (OpenAI evals' Includes)",
                         "check": {"type": "contains_any", "values": ["{{ expected }}"],
                                   "case_sensitive": sensitive}})
    for case, answers in zip(out.cases, ideals, strict=True):
        case["criteria"] = [{"id": "includes", "check": {
            "type": "contains_any", "values": answers, "case_sensitive": sensitive}}]


def read_registry_eval(path: Path, items: Path | None = None) -> list[dict[str, Any]]:
    """An openai/evals registry YAML (``registry/evals/NAME.yaml``) as one pseudo-grader,
    ``{"type": "registry", "class": ..., "args": ...}``: of the evals it defines, the one
    whose ``samples_jsonl`` is the ``items`` file (``logic/samples.jsonl``), else the one an
    ``id`` names (the file's first), else the one entry with a ``class``."""
    from cycle.yamlload import parse_yaml

    data = parse_yaml(read_text(path), str(path)).data
    if not isinstance(data, dict):
        raise ConfigError("expected an openai/evals registry eval (NAME: {id: ...}, "
                          "NAME.dev.v0: {class: ..., args: ...})", file=str(path))
    specs = {k: v for k, v in data.items() if isinstance(v, dict) and "class" in v}
    ids = [v["id"] for v in data.values() if isinstance(v, dict) and v.get("id") in specs]
    if not specs or (len(specs) > 1 and not ids):
        raise ConfigError("no eval with a class (or several and no id naming one)",
                          file=str(path), hint="An openai/evals registry/evals/*.yaml file.")
    own = [k for k, v in specs.items() if items is not None and isinstance(v.get("args"), dict)
           and isinstance(v["args"].get("samples_jsonl"), str)
           and Path(*items.parts[-2:]).as_posix().endswith(v["args"]["samples_jsonl"])]
    name = own[0] if own else ids[0] if ids else next(iter(specs))
    spec = specs[name]
    if not isinstance(spec.get("args") or {}, dict):
        raise ConfigError("expected a mapping", file=str(path), field=f"{name}.args")
    return [{"type": "registry", "name": name, "class": str(spec["class"]),
             "args": spec.get("args") or {}, "path": str(path)}]


def _template(text: str) -> str:
    """A grader's template in cycle's terms: ``{{item.x}}`` -> ``{{ x }}``."""
    return _ITEM.sub(lambda m: "{{ " + m[1] + " }}", text)


def _words(text: str) -> str:
    """A grader's prompt as a rubric the judge reads (it sees the answer and the case)."""
    text = _SAMPLE.sub("the answer", text)
    return _ITEM.sub(lambda m: f"the case's {m[1]}", text).strip()


def _grader(grader: dict[str, Any], n: int, out: Converted) -> None:
    kind = grader.get("type")
    gid = re.sub(r"[^A-Za-z0-9_-]+", "_", str(grader.get("name") or f"{kind}_{n + 1}")).strip("_")
    gid = gid or f"grader_{n + 1}"
    base, k = gid, 2
    while gid in {c["id"] for c in out.criteria}:  # two graders of one name: two criteria
        gid, k = f"{base}_{k}", k + 1
    if kind == "string_check":
        source, reference = str(grader.get("input", "")), str(grader.get("reference", ""))
        operation = grader.get("operation")
        if not _SAMPLE.fullmatch(source.strip()):
            out.gaps.append(f"grader {gid}: a string_check of {source!r}, not of the answer")
            return
        if operation == "eq":
            check: dict[str, Any] = {"type": "exact", "value": _template(reference)}
        elif operation in ("like", "ilike"):
            check = {"type": "contains", "values": [_template(reference)],
                     "case_sensitive": operation == "like"}
        else:
            out.gaps.append(f"grader {gid}: string_check operation {operation!r} (cycle has "
                            "no not-equal check)")
            return
        out.criteria.append({"id": gid, "check": check})
    elif kind in ("score_model", "label_model"):
        messages = grader.get("input") or []
        prompt = "\n\n".join(_words(_text(m.get("content"))) for m in messages
                             if isinstance(m, dict))
        criterion: dict[str, Any] = {"id": gid}
        if kind == "label_model":
            labels, passing = grader.get("labels") or [], grader.get("passing_labels") or []
            prompt += (f"\n\nLabel the answer as one of: {', '.join(map(str, labels))}. It "
                       f"passes when the label is one of: {', '.join(map(str, passing))}.")
        else:
            low, high = (grader.get("range") or [0, 1])[:2]
            threshold = grader.get("pass_threshold")
            if threshold is not None and high > low:
                criterion["pass_mark"] = round(100 * (float(threshold) - low) / (high - low), 2)
        criterion["rubric"] = prompt.strip() or f"The {gid} grader's judgement."
        out.criteria.append(criterion)
    else:
        out.gaps.append(f"grader {gid}: type {kind!r} is not converted (cycle has no "
                        f"{'similarity' if kind == 'text_similarity' else str(kind)} check)")
