"""Test cases and case files.

A case file is YAML: a list of cases, or a mapping ``{cases: [...]}``::

    - id: late-order
      name: Late order, polite customer
      tags: [shipping]
      input: {customer: Ann, order: A-1042, question: Where is my parcel?}
      expected: "Hi Ann, ..."
      criteria:                    # added, or overriding the suite's by id
        - {id: accuracy, weight: 2}

``input`` is a mapping of template variables, or a plain message string
(rendered as ``{{ input }}``). Every file is validated before any model is
called; errors name file:line (field). Duplicate case ids are an error.
"""

from __future__ import annotations

import glob
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from cycle.durations import parse_duration
from cycle.errors import ConfigError
from cycle.judge.criteria import CriterionConfig, merge, resolve
from cycle.mocks import MockSpec, UserAgentSpec
from cycle.query import check_query
from cycle.yamlload import LoadedYaml, iter_items, load_yaml, read_text, relocate, validate

#: user turns a conversation may take when its case sets no max_turns
DEFAULT_MAX_TURNS = 20
#: what a limit ending a conversation means: not judged, judged, or a verdict
Outcome = Literal["terminated", "judged", "pass", "fail"]

class FollowUp(BaseModel):
    """A scripted user turn: ``say`` (a template over the case's variables), ``turns``
    times in a row."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    say: str = Field(min_length=1, description="What the user says (a Jinja2 template).")
    turns: int = Field(1, ge=1, le=1000, description="How many turns in a row it is said.")


class SimulatedUser(BaseModel):
    """A simulated user: a model playing a persona with a goal, seeing the conversation
    so far, saying when the goal is met (seed 003's aiUser). Its persona, goal and
    system prompt are templates over the case's variables."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    model: str = Field(description="The model that plays the user, e.g. openai:gpt-4o-mini.")
    persona: str = Field(min_length=1, description="Who the user is, in a sentence or two.")
    goal: str = Field(min_length=1, description="What the user wants from the conversation.")
    facts: dict[str, Any] = Field(
        default_factory=dict, description="What the user knows and gives when asked "
        "(order number, reason...).")
    system: str | None = Field(
        None, description="The user model's system prompt, replacing cycle's (a template "
        "over the case's variables, like persona and goal).")
    format_history: str | None = Field(
        None, description="package.module:function turning the conversation so far "
        "([{role, text}], the user being 'user') into the text the user model reads "
        "(seed 003's formatHistory).")


class FieldValue(BaseModel):
    """``field_value``: the agent's structured answer has ``equals`` at ``field``."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    field: str = Field(min_length=1, description="A dotted path in the answer's JSON.")
    equals: Any = Field(description="The value wanted there.")


class NaturalLanguage(BaseModel):
    """``natural_language``: a model decides from the conversation whether ``condition``
    holds (its calls are cached and costed like any other)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    condition: str = Field(min_length=1, description="The condition, in words.")
    model: str | None = Field(None, description="The deciding model (default: the simulated "
                              "user's, else the agent's).")


class EndCondition(BaseModel):
    """When a conversation ends early, checked after every answer of the agent: exactly
    one of ``state_matches`` (a query over the case's state, see cycle.query),
    ``field_set`` / ``field_value`` (on a structured answer), ``natural_language``,
    ``custom`` (package.module:function of the conversation), or ``all`` / ``any`` /
    ``not`` of other conditions."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, populate_by_name=True)

    state_matches: dict[str, Any] | None = None
    field_set: str | None = None
    field_value: FieldValue | None = None
    natural_language: NaturalLanguage | None = None
    custom: str | None = None
    all_of: list[EndCondition] | None = Field(None, alias="all")
    any_of: list[EndCondition] | None = Field(None, alias="any")
    not_: EndCondition | None = Field(None, alias="not")

    @model_validator(mode="after")
    def _one(self) -> EndCondition:
        given = [k for k, v in self if v is not None]
        if len(given) != 1:
            names = "state_matches, field_set, field_value, natural_language, custom, all, any, not"
            raise ValueError(f"give exactly one of {names} (got {', '.join(given) or 'none'})")
        if self.state_matches is not None:
            check_query(self.state_matches, "state_matches")
        return self

    def walk(self) -> list[EndCondition]:
        """This condition and every one inside it."""
        inner = [*(self.all_of or []), *(self.any_of or []), *([self.not_] if self.not_ else [])]
        return [self, *(c for child in inner for c in child.walk())]

    def describe(self) -> str:
        if self.state_matches is not None:
            return f"state_matches {self.state_matches}"
        if self.field_set is not None:
            return f"field_set {self.field_set}"
        if self.field_value is not None:
            return f"field_value {self.field_value.field} = {self.field_value.equals!r}"
        if self.natural_language is not None:
            return f"natural_language {self.natural_language.condition!r}"
        if self.custom is not None:
            return f"custom {self.custom}"
        if self.not_ is not None:
            return f"not ({self.not_.describe()})"
        parts, word = (self.all_of, "all") if self.all_of is not None else (self.any_of, "any")
        return f"{word} of ({'; '.join(p.describe() for p in parts or [])})"


class FunctionUser(BaseModel):
    """A user played by a Python function: ``function(conversation, state)`` gets the
    conversation so far (``[{role, text}]``, the user being "user") and the case's state,
    and returns the next message, or None (or ``(message, True)``) when it is done."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    function: str = Field(description="package.module:function.")


class ConversationSpec(BaseModel):
    """A multi-turn case: the user turns after the first input, and how it may end.

    What the way it ends means follows seed 003's outcome rules, each a setting:
    an end condition holding -> ``on_condition_met`` (``pass``: the judge decides);
    ``max_turns`` reached -> ``on_max_turns`` (``fail``); the script used up or the
    simulated user done while an end condition never held -> ``on_inputs_exhausted``
    (``fail``; without an end condition the conversation is simply complete and judged);
    ``max_duration`` reached -> ``on_max_duration`` (``terminated``: reported apart with
    its trace, not judged, as seed 000 counts it). ``pass`` never lifts a case over a
    failed criterion: the case passes when the judge passes it too.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    follow_ups: list[str | FollowUp] = Field(
        default_factory=list, description="The user's next turns, in order.")
    user: SimulatedUser | FunctionUser | None = Field(
        None, description="After the follow-ups, a simulated user speaks until its goal is "
        "met (or max_turns).")
    max_turns: int = Field(DEFAULT_MAX_TURNS, ge=1, le=1000,
                           description="User turns at most (the first input counts).")
    on_max_turns: Outcome = Field("fail", description="What reaching max_turns means.")
    max_duration: float | None = Field(
        None, description="Wall time the conversation may take (seconds, or '90s', '2m'); "
        "reaching it ends the conversation, keeping its trace.")
    on_max_duration: Outcome = Field(
        "terminated", description="What reaching max_duration means.")
    end_when: EndCondition | None = Field(
        None, description="Ends the conversation when it holds after an answer of the agent.")
    on_condition_met: Literal["judged", "pass", "fail"] = Field(
        "pass", description="What the end condition holding means (pass: the judge decides).")
    on_inputs_exhausted: Literal["judged", "pass", "fail"] = Field(
        "fail", description="What running out of turns to say means when an end condition "
        "was given and never held.")

    @field_validator("max_duration", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value, "max_duration")

    def user_turns(self) -> list[str]:
        """The follow-up templates, one per turn, repeats expanded."""
        out: list[str] = []
        for f in self.follow_ups:
            if isinstance(f, str):
                out.append(f)
            else:
                out += [f.say] * f.turns
        return out


class TestCase(BaseModel):
    """One case: an input for the agent, optionally a reference answer and its own criteria."""

    __test__ = False  # not a pytest class, despite the name
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    id: str = Field(min_length=1, description="Unique id of the case across all case files.")
    name: str = Field("", description="A short human name (default: the id).")
    description: str = Field("", description="What the case is about.")
    tags: list[str] = Field(default_factory=list, description="Tags to filter runs by.")
    input: dict[str, Any] | str = Field(
        description="Template variables, or a plain message (rendered as {{ input }})."
    )
    expected: Any = Field(None, description="A reference output the judge may compare with.")
    criteria: list[CriterionConfig] = Field(
        default_factory=list, description="Criteria added to, or overriding (by id), the suite's."
    )
    mocks: dict[str, MockSpec] = Field(
        default_factory=dict, description="Tool mocks for this case, overriding the suite's by tool."
    )
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="The case's state at the start, by scope: {session: {...}, user: {...}}.",
    )
    user_agents: dict[str, UserAgentSpec] = Field(
        default_factory=dict, description="Who answers a tool that asks the user, overriding "
        "the suite's by tool.")
    conversation: ConversationSpec | None = Field(
        None, description="More user turns after the input (a multi-turn case).")
    run_tools: bool = Field(
        True, description="false: the model's first turn is the answer; the tools it asks for "
        "are recorded, never run (routing evals, as tool-forge's files without stubs).")
    max_steps: int | None = Field(
        None, ge=1, le=1000, description="Model turns per user turn for this case (default: "
        "tools.max_steps).")
    _variables: dict[str, Any] | None = PrivateAttr(None)
    _source: str = PrivateAttr("")

    @field_validator("id")
    @classmethod
    def _id_on_one_line(cls, value: str) -> str:
        # an id is printed on console lines, report headings and file names: a newline
        # or an escape sequence in it would forge a line or act on the terminal
        from cycle.safetext import printable

        if printable(value, oneline=True) != value:
            raise ValueError(f"a case id may not hold control characters or newlines: "
                             f"{printable(value, oneline=True)!r}")
        return value

    @property
    def source(self) -> str:
        """Where the case was defined, for messages ("cases/a.yaml:12")."""
        return self._source

    @property
    def title(self) -> str:
        return self.name or self.id

    @property
    def variables(self) -> dict[str, Any]:
        """The variables templates are rendered with: the input mapping plus ``input``
        (the whole input) and ``expected``. Computed once per case."""
        if self._variables is None:
            base: dict[str, Any] = dict(self.input) if isinstance(self.input, dict) else {}
            base.setdefault("input", self.input)
            base.setdefault("expected", self.expected)
            self._variables = base
        return self._variables


class CaseList(Sequence[TestCase]):
    """Cases kept compact (each pickled: about 500 bytes against 2 KB as a model), made
    into TestCases as they are read. A suite of 100,000 cases is held in about 50 MB, and
    every reader (the run, the checks, the loop) gets the cases it iterates one at a time.
    Each read is a fresh copy (about 10 microseconds)."""

    def __init__(self, cases: Iterable[TestCase] = ()) -> None:
        self._packed: list[bytes] = []
        #: the cases' ids, in order (read without unpacking)
        self.ids: list[str] = []
        for case in cases:
            self.append(case)

    @classmethod
    def of(cls, cases: Iterable[TestCase]) -> CaseList:
        """``cases`` as a CaseList (itself when it is one)."""
        return cases if isinstance(cases, CaseList) else cls(cases)

    def __len__(self) -> int:
        return len(self._packed)

    @overload
    def __getitem__(self, index: int) -> TestCase: ...
    @overload
    def __getitem__(self, index: slice) -> CaseList: ...

    def __getitem__(self, index: int | slice) -> TestCase | CaseList:
        if isinstance(index, slice):
            return self._subset(self._packed[index], self.ids[index])
        return pickle.loads(self._packed[index])

    def __iter__(self) -> Iterator[TestCase]:
        return map(pickle.loads, self._packed)

    def append(self, case: TestCase) -> None:
        self._packed.append(pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL))
        self.ids.append(case.id)

    def where(self, keep: Callable[[TestCase], bool]) -> CaseList:
        """The cases ``keep`` keeps, in order (not packed again)."""
        return self.pick([i for i, case in enumerate(self) if keep(case)])

    def pick(self, indices: Sequence[int]) -> CaseList:
        """The cases at ``indices``, in their order (not packed again)."""
        return self._subset([self._packed[i] for i in indices], [self.ids[i] for i in indices])

    @classmethod
    def _subset(cls, packed: list[bytes], ids: list[str]) -> CaseList:
        out = cls()
        out._packed, out.ids = packed, ids
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CaseList({len(self)} cases)"


def _case_list(doc: LoadedYaml) -> tuple[list[Any], tuple[str | int, ...]]:
    data = doc.data
    if isinstance(data, list):
        return data, ()
    if isinstance(data, dict) and set(data) == {"cases"} and isinstance(data["cases"], list):
        return data["cases"], ("cases",)
    if isinstance(data, dict) and "cases" in data:
        extra = sorted(k for k in data if k != "cases")
        if extra:
            raise ConfigError(
                f"unknown key '{extra[0]}' in case file", file=doc.file,
                line=doc.line_of((extra[0],)), field=extra[0],
                hint="A case file is a list of cases or a mapping with the single key 'cases'.",
            )
    if data is None:
        raise ConfigError(
            "the case file is empty", file=doc.file,
            hint="Add cases (a list of {id, input}), or delete the file or exclude it from 'cases:'.",
        )
    raise ConfigError(
        "expected a list of cases or {cases: [...]}", file=doc.file, line=1,
        hint="Each case needs at least 'id' and 'input'.",
    )


def load_case_file(path: str | Path) -> CaseList:
    """Validate every case of one file (see ``iter_case_file``)."""
    return CaseList(iter_case_file(path))


def iter_case_file(path: str | Path, *, project: Path | None = None) -> Iterator[TestCase]:
    """Validate the cases of one file, one at a time. ``project``: the folder (resolved)
    of the cycle.yaml they belong to, whose own modules their python checks import.

    The file is read one case at a time (``iter_items``): a file of 100,000 cases never
    exists as one YAML tree, which takes several times the memory of the cases."""
    items = iter_items(read_text(path), str(path), key="cases")
    if items is None:
        # not a list: parsed whole, for the message saying what it is instead
        doc = load_yaml(path)
        whole, prefix = _case_list(doc)
        items = ((prefix + (i,), doc) for i in range(len(whole)))
    for at, doc in items:
        if not isinstance(doc.at(at), dict):
            raise ConfigError("a case must be a mapping with 'id' and 'input'",
                              file=doc.file, line=doc.line_of(at), field=f"cases[{at[-1]}]")
        case = validate(TestCase, doc, prefix=at, what="a case", root="cases",
                        project=project)
        case._source = f"{doc.file}:{doc.line_of(at)}"
        yield case


def append_to_case_file(path: Path, cases: Sequence[dict[str, Any]]) -> None:
    """Append cases (mappings) to a case file, created when missing; what is there stays,
    comments too. The result must read back as valid cases, else the file is left as it
    was (written whole through a temporary file, or not at all)."""
    import yaml

    body = path.read_text(encoding="utf-8") if path.exists() else ""
    if body.strip() in ("", "[]"):
        body = ""
    elif not body.endswith("\n"):
        body += "\n"
    text = yaml.safe_dump(list(cases), sort_keys=False, allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(body + text, encoding="utf-8")
    try:
        load_case_file(tmp)
    except ConfigError as e:
        tmp.unlink()
        raise ConfigError(f"{path} would not read back as cases: {e.message}", file=str(path),
                          hint="A case file is a YAML list of cases.") from None
    tmp.replace(path)


def _inside(pattern: str, full: str, base: Path) -> None:
    """A glob must search inside the config's folder: ``/**/x`` would walk the whole
    file system before the first case is read. (A file named outright may be anywhere.)"""
    parts = Path(full).parts
    fixed = Path(*parts[:next(i for i, p in enumerate(parts) if glob.has_magic(p))])
    root = base.resolve()
    if not fixed.resolve().is_relative_to(root):
        raise ConfigError(
            f"the case glob '{pattern}' searches outside the folder of cycle.yaml ({root})",
            file=str(base / "cycle.yaml"),
            hint="Move the case files under that folder, or list them by name.",
        )


def expand_patterns(patterns: Iterable[str], base_dir: str | Path) -> list[Path]:
    """Files matching the globs (relative to base_dir), in order, each once."""
    base = Path(base_dir)
    files: list[Path] = []
    seen: set[Path] = set()
    for pattern in patterns:
        full = pattern if Path(pattern).is_absolute() else str(base / pattern)
        if glob.has_magic(pattern):
            _inside(pattern, full, base)
        matches = sorted(glob.glob(full, recursive=True))
        if not matches and not glob.has_magic(pattern):
            raise ConfigError(f"case file '{pattern}' not found", file=str(base / pattern))
        for m in matches:
            p = Path(m)
            if p.is_symlink() and not p.exists():
                # a dangling link or a loop: a case file that cannot be read, not one to skip
                raise ConfigError(
                    f"the case file {p} is a symlink that leads nowhere (a loop, or its "
                    "target is gone)", file=str(p),
                    hint="Point the link at a case file, or remove it.")
            if p.is_file() and p not in seen:
                seen.add(p)
                files.append(p)
    return files


def load_cases(
    patterns: Sequence[str] | str,
    base_dir: str | Path = ".",
    *,
    criteria: Sequence[CriterionConfig] | None = None,
    threshold: float = 70.0,
    readers: Sequence[Callable[[Path], list[TestCase] | None]] = (),
) -> CaseList:
    """Load and validate every case file matching ``patterns``.

    With ``criteria`` (the suite's), each case's own criteria are resolved
    against them now, so that a bad override is reported before any call.
    ``readers`` read other tools' case files: each returns the cases of a file
    it knows, or None; a file none of them knows is a cycle case file.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    files = expand_patterns(patterns, base_dir)
    if not files:
        raise ConfigError(
            "no case files match " + ", ".join(repr(p) for p in patterns),
            file=str(base_dir), hint="Check the 'cases:' globs; they are relative to cycle.yaml.",
        )
    return load_case_files(files, criteria=criteria, threshold=threshold, readers=readers,
                           project=Path(base_dir).resolve())


def load_case_files(
    files: Iterable[Path],
    *,
    criteria: Sequence[CriterionConfig] | None = None,
    threshold: float = 70.0,
    readers: Sequence[Callable[[Path], list[TestCase] | None]] = (),
    project: Path | None = None,
) -> CaseList:
    """The cases of ``files`` (already expanded), validated, their ids unique; see
    ``load_cases`` for ``criteria`` and ``readers``, ``iter_case_file`` for ``project``."""
    cases = CaseList()
    where: dict[str, str] = {}
    for f in files:
        read = next((found for found in (r(f) for r in readers) if found is not None), None)
        for case in read if read is not None else iter_case_file(f, project=project):
            if case.id in where:
                file, _, line = case.source.rpartition(":")
                raise ConfigError(
                    f"duplicate case id '{case.id}' (also at {where[case.id]})",
                    file=file, line=int(line) if line.isdigit() else None, field="id",
                )
            where[case.id] = case.source
            if criteria is not None and case.criteria:
                for o in case.criteria:
                    if "pairwise" in o.model_fields_set:
                        # the cycle compares two versions on every case alike: a case
                        # cannot make a criterion compared on it alone
                        file, _, line = case.source.rpartition(":")
                        raise ConfigError(
                            f"case '{case.id}' sets 'pairwise' on criterion '{o.id}': whether "
                            "a criterion is compared pairwise is the suite's setting",
                            file=file, line=int(line) if line.isdigit() else None,
                            field=f"criteria ({o.id})",
                            hint="Set pairwise on the criterion in cycle.yaml's criteria:, "
                            "and remove it from the case.")
                for c in merge(criteria, case.criteria):
                    try:
                        resolve(c, threshold=threshold)
                    except ConfigError as e:
                        file, _, line = case.source.rpartition(":")
                        raise relocate(e, file=file, line=int(line) if line.isdigit() else None,
                                       field=f"criteria ({c.id})") from None
            cases.append(case)
    return cases


def select(
    cases: Sequence[TestCase], *, tags: Sequence[str] = (), ids: Sequence[str] = ()
) -> CaseList:
    """Cases with one of ``tags`` (any) and, when ``ids`` is given, one of those ids.
    An id that names no case is an error (a typo would otherwise run nothing)."""
    cases = CaseList.of(cases)
    if ids:
        known = set(cases.ids)
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ConfigError(
                f"no case with id {', '.join(repr(u) for u in unknown)}",
                hint="Known ids: " + ", ".join(sorted(known)[:20]) + ("..." if len(known) > 20 else ""),
            )

    def keep(c: TestCase) -> bool:
        return (not tags or bool(set(tags) & set(c.tags))) and (not ids or c.id in ids)

    return cases.where(keep) if tags or ids else cases
