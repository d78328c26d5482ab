"""Stop conditions of the improvement cycle, composable with all / any / not.

In ``cycle.yaml``::

    improve:
      stop: {any: [{target_score: 90}, {max_rounds: 5}, {max_cost: 0.5}]}

Leaves: ``target_score`` (the incumbent's score reaches it), ``max_rounds``
(improvement rounds run, the baseline evaluation not counted),
``max_cost`` (USD spent by the cycle; also a hard cap checked before every
model call), ``max_duration`` (seconds, or "90s", "10m", "2h"),
``no_improvement`` (K rounds in a row without an accepted candidate, or with
gains below ``min_delta``: ``{no_improvement: 3}`` or
``{no_improvement: {rounds: 3, min_delta: 1.0}}``) and ``custom`` (an import
path ``package.module:function`` called with the CycleState, returning a bool
or a reason string). A list is ``any``. The conditions are checked after the
baseline evaluation and after every round.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from msgspec import Struct

from cycle.durations import parse_duration
from cycle.errors import ConfigError
from cycle.imports import import_object
from cycle.words import plural

DEFAULT_STOP: dict[str, Any] = {"max_rounds": 5}


class RoundRecord(Struct, frozen=True, kw_only=True):
    """One finished round (round 0 is the baseline): what the stop conditions check, the
    cycle's result lists and a resume loads (cycle.loop.ledger)."""

    round: int
    #: the version the round evaluated (its candidate; the incumbent when there was none)
    version: str
    score: float | None
    accepted: bool | None = None
    delta: float | None = None
    #: why the candidate was kept or not
    reason: str = ""
    cost: float = 0.0
    #: "baseline", "improve" or "confirm"
    stage: str = "improve"


class CycleState(Struct, frozen=True):
    """The cycle so far, what every condition is checked against."""

    rounds: tuple[RoundRecord, ...] = ()
    #: the score of the current incumbent (the version head points at)
    incumbent_score: float | None = None
    total_cost: float = 0.0
    #: seconds the cycle has been running (across resumes)
    elapsed: float = 0.0
    #: the hard cap was hit while a round was in flight
    budget_exhausted: bool = False

    @property
    def improvement_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.round >= 1 and r.stage == "improve")


class StopCondition(Protocol):
    def check(self, state: CycleState) -> str | None:
        """The reason to stop, or None to go on."""

    def describe(self) -> str: ...


class Leaf(StopCondition, Protocol):
    """A condition written ``{key: value}`` in ``improve.stop``."""

    key: ClassVar[str]

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> StopCondition:
        """The condition of ``value``; ValueError naming ``here`` when it is wrong."""


class TargetScore(Struct, frozen=True):
    value: float
    key: ClassVar[str] = "target_score"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> TargetScore:
        return cls(float(_number(value, here)))

    def check(self, state: CycleState) -> str | None:
        s = state.incumbent_score
        if s is not None and s >= self.value:
            return f"target_score: the score {s:.1f} reached the target {self.value:g}"
        return None

    def describe(self) -> str:
        return f"target_score {self.value:g}"


class MaxRounds(Struct, frozen=True):
    value: int
    key: ClassVar[str] = "max_rounds"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> MaxRounds:
        # zero rounds would only pay for the baseline: that is `cycle run`
        return cls(int(_number(value, here, integer=True, least=1)))

    def check(self, state: CycleState) -> str | None:
        if state.improvement_rounds >= self.value:
            return f"max_rounds: {state.improvement_rounds} of {self.value} rounds run"
        return None

    def describe(self) -> str:
        return f"max_rounds {self.value}"


class MaxCost(Struct, frozen=True):
    value: float
    key: ClassVar[str] = "max_cost"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> MaxCost:
        return cls(float(_number(value, here)))

    def check(self, state: CycleState) -> str | None:
        if state.budget_exhausted or state.total_cost >= self.value:
            return f"max_cost: ${state.total_cost:.4f} spent of the ${self.value:g} cap"
        return None

    def describe(self) -> str:
        return f"max_cost ${self.value:g}"


class MaxDuration(Struct, frozen=True):
    seconds: float
    key: ClassVar[str] = "max_duration"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> MaxDuration:
        return cls(parse_duration(value, here))

    def check(self, state: CycleState) -> str | None:
        if state.elapsed >= self.seconds:
            return f"max_duration: {state.elapsed:.0f}s of {self.seconds:g}s used"
        return None

    def describe(self) -> str:
        return f"max_duration {self.seconds:g}s"


class NoImprovement(Struct, frozen=True):
    rounds: int
    min_delta: float = 0.0
    key: ClassVar[str] = "no_improvement"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> NoImprovement:
        if isinstance(value, dict):
            unknown = set(value) - {"rounds", "min_delta"}
            if unknown or "rounds" not in value:
                raise ValueError(f"{here}: expected {{rounds: K, min_delta: D}}, got {value!r}")
            return cls(int(_number(value["rounds"], f"{here}.rounds", integer=True)) or 1,
                       float(_number(value.get("min_delta", 0.0), f"{here}.min_delta")))
        return cls(int(_number(value, here, integer=True)) or 1)

    def check(self, state: CycleState) -> str | None:
        done = [r for r in state.rounds if r.round >= 1 and r.stage == "improve"]
        if len(done) < self.rounds:
            return None
        last = done[-self.rounds:]
        if all(not r.accepted or (r.delta or 0.0) < self.min_delta for r in last):
            gain = f" (or gains below {self.min_delta:g})" if self.min_delta else ""
            return f"no_improvement: {plural(self.rounds, 'round')} without an accepted candidate{gain}"
        return None

    def describe(self) -> str:
        return f"no_improvement {self.rounds}" + (f" min_delta {self.min_delta:g}" if self.min_delta else "")


class Custom(Struct, frozen=True):
    """A user predicate: ``package.module:function(state) -> bool | str``."""

    path: str
    #: the directory the config lives in, put on sys.path to import from
    base_dir: str | None = None
    key: ClassVar[str] = "custom"

    @classmethod
    def parse(cls, value: Any, here: str, base_dir: str | None) -> Custom:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{here}: expected an import path such as mypkg.stops:enough")
        return cls(value.strip(), base_dir)

    def resolve(self) -> Callable[[CycleState], Any]:
        return _predicate(self.path, self.base_dir)

    def check(self, state: CycleState) -> str | None:
        answer = self.resolve()(state)
        if isinstance(answer, str) and answer:
            return f"custom: {answer}"
        return f"custom: {self.path} returned true" if answer else None

    def describe(self) -> str:
        return f"custom {self.path}"


@functools.cache
def _predicate(path: str, base_dir: str | None) -> Callable[[CycleState], Any]:
    """The function a custom stop condition names, imported once."""
    if ":" not in path:  # package.module.function, as written before the colon form
        module_name, _, attr = path.rpartition(".")
        path = f"{module_name}:{attr}"
    if base_dir and base_dir not in sys.path:
        sys.path.insert(0, base_dir)
    try:
        fn = import_object(path, what="improve.stop.custom")
    except ConfigError as e:
        detail = e.message.split(": ", 1)[-1] if e.field else e.message
        raise ConfigError(
            f"cannot import the custom stop condition {path!r}: {detail}",
            field="improve.stop.custom",
            hint="Write it as package.module:function, importable from the config's folder.",
        ) from None
    if not callable(fn):
        raise ConfigError(f"{path!r} is not callable", field="improve.stop.custom")
    return fn


class AnyOf(Struct, frozen=True):
    conditions: tuple[StopCondition, ...]

    def check(self, state: CycleState) -> str | None:
        for c in self.conditions:
            reason = c.check(state)
            if reason:
                return reason
        return None

    def describe(self) -> str:
        return "any(" + ", ".join(c.describe() for c in self.conditions) + ")"


class AllOf(Struct, frozen=True):
    conditions: tuple[StopCondition, ...]

    def check(self, state: CycleState) -> str | None:
        reasons = [c.check(state) for c in self.conditions]
        if reasons and all(reasons):
            return " and ".join(r for r in reasons if r)
        return None

    def describe(self) -> str:
        return "all(" + ", ".join(c.describe() for c in self.conditions) + ")"


class Not(Struct, frozen=True):
    condition: StopCondition

    def check(self, state: CycleState) -> str | None:
        if self.condition.check(state):
            return None
        return f"not ({self.condition.describe()})"

    def describe(self) -> str:
        return f"not({self.condition.describe()})"


# -- parsing ---------------------------------------------------------------------

#: the conditions by their YAML key: a new one is a class with a ``key``, a ``parse``
#: classmethod, ``check`` and ``describe``, added here
LEAVES: dict[str, type[Leaf]] = {
    c.key: c for c in (TargetScore, MaxRounds, MaxCost, MaxDuration, NoImprovement, Custom)}
COMBINATORS = ("any", "all", "not")


def _number(value: Any, where: str, *, integer: bool = False, least: float = 0) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < least):
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{where}: expected {kind} >= {least:g}, got {value!r}")
    if integer and int(value) != value:
        raise ValueError(f"{where}: expected a whole number, got {value!r}")
    return value


def parse_stop(spec: Any, *, where: str = "improve.stop", base_dir: str | Path | None = None) -> StopCondition:
    """Build a condition tree from its YAML form; ValueError names the path of a bad node."""
    if spec is None:
        spec = DEFAULT_STOP
    if isinstance(spec, list):
        if not spec:
            raise ValueError(f"{where}: an empty list stops nothing; give at least one condition")
        return AnyOf(tuple(parse_stop(s, where=f"{where}[{i}]", base_dir=base_dir) for i, s in enumerate(spec)))
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ValueError(
            f"{where}: each condition is a mapping with one key, one of "
            f"{', '.join([*LEAVES, *COMBINATORS])}; got {spec!r}"
        )
    ((key, value),) = spec.items()
    here = f"{where}.{key}"
    if key in ("any", "all"):
        if not isinstance(value, list) or not value:
            raise ValueError(f"{here}: expected a non-empty list of conditions")
        parts = tuple(parse_stop(s, where=f"{here}[{i}]", base_dir=base_dir) for i, s in enumerate(value))
        return AnyOf(parts) if key == "any" else AllOf(parts)
    if key == "not":
        return Not(parse_stop(value, where=here, base_dir=base_dir))
    leaf = LEAVES.get(key)
    if leaf is None:
        raise ValueError(f"{where}: unknown condition {key!r}; known: {', '.join([*LEAVES, *COMBINATORS])}")
    return leaf.parse(value, here, str(base_dir) if base_dir else None)


def resolve_custom(condition: StopCondition) -> None:
    """Import every custom predicate in the tree now, so that a bad import path is an
    input error before the cycle starts, not after the baseline was paid for."""
    if isinstance(condition, Custom):
        condition.resolve()
    elif isinstance(condition, (AnyOf, AllOf)):
        for c in condition.conditions:
            resolve_custom(c)
    elif isinstance(condition, Not):
        resolve_custom(condition.condition)


def cost_cap(condition: StopCondition) -> float | None:
    """The hard dollar cap: the smallest max_cost in the tree (outside any ``not``)."""
    if isinstance(condition, MaxCost):
        return condition.value
    if isinstance(condition, (AnyOf, AllOf)):
        caps = [c for c in (cost_cap(x) for x in condition.conditions) if c is not None]
        return min(caps) if caps else None
    return None


def max_rounds_of(condition: StopCondition) -> int | None:
    """The most rounds the tree lets a cycle run: the smallest max_rounds that alone stops
    it (a leaf, or one of ``any``); None when no max_rounds bounds it."""
    if isinstance(condition, MaxRounds):
        return condition.value
    if isinstance(condition, AnyOf):
        bounds = [r for r in (max_rounds_of(x) for x in condition.conditions) if r is not None]
        return min(bounds) if bounds else None
    return None


def target_of(condition: StopCondition) -> float | None:
    """The score a cycle aims at: the smallest target_score in the tree (outside any ``not``)."""
    if isinstance(condition, TargetScore):
        return condition.value
    if isinstance(condition, (AnyOf, AllOf)):
        targets = [t for t in (target_of(x) for x in condition.conditions) if t is not None]
        return min(targets) if targets else None
    return None


def has_limit(condition: StopCondition) -> bool:
    """Whether the tree can stop a cycle that never improves (else it could run forever)."""
    if isinstance(condition, (MaxRounds, MaxCost, MaxDuration, NoImprovement, Custom)):
        return True
    if isinstance(condition, AnyOf):
        return any(has_limit(c) for c in condition.conditions)
    if isinstance(condition, AllOf):
        return all(has_limit(c) for c in condition.conditions)
    return False
