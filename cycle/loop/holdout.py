"""Held-out cases: the ones the improver never sees (``improve.validation``).

    improve:
      validation: 0.25              # a quarter of the cases, chosen by a hash of their ids
      validation: [refund-edge, tricky]   # these case ids or tags
      validation: false             # none

The improver writes its edits from the low scorers it is shown; an edit can
help those by hurting the rest (quoting their expected answers, narrowing the
prompt to them). Cases it never saw tell: every decision reports the gain on
the seen and on the held-out cases apart, and rejects a candidate whose
held-out cases did not gain.

By default a suite of ``DEFAULT_FROM`` cases or more holds out
``DEFAULT_FRACTION`` of them; a smaller one holds out none (a handful of
held-out cases says little and costs the improver the failures it learns
from), unless asked. The split hashes each case id, so it is the same on every
run and a new case does not reshuffle the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from cycle.cases import TestCase
from cycle.errors import ConfigError

#: suites at least this large hold out cases unless improve.validation says otherwise
DEFAULT_FROM = 40
DEFAULT_FRACTION = 0.25


def _rank(case_id: str) -> float:
    """A stable number in [0, 1) for a case id."""
    return int.from_bytes(hashlib.sha256(case_id.encode()).digest()[:8], "big") / 2**64


def held_out_cases(cases: Sequence[TestCase], spec: Any = None) -> frozenset[str]:
    """The ids of the held-out cases for ``improve.validation`` = ``spec``."""
    if spec is None:
        spec = DEFAULT_FRACTION if len(cases) >= DEFAULT_FROM else False
    if spec is False or spec == 0:
        return frozenset()
    if spec is True:
        spec = DEFAULT_FRACTION
    if isinstance(spec, (int, float)):
        if not 0 < spec < 1:
            raise ConfigError(f"a fraction of the cases is between 0 and 1, got {spec}",
                              field="improve.validation", hint="e.g. validation: 0.25")
        count = round(len(cases) * spec)
        if count < 1 or count >= len(cases):
            raise ConfigError(
                f"{spec:g} of {len(cases)} cases holds out {count}: at least one "
                "case must be held out and one shown to the improver",
                field="improve.validation", hint="Add cases, or name the held-out ones by id or tag.")
        ranked = sorted(cases, key=lambda c: (_rank(c.id), c.id))
        return frozenset(c.id for c in ranked[:count])
    names = [spec] if isinstance(spec, str) else list(spec)
    chosen: set[str] = set()
    for name in names:
        hit = {c.id for c in cases if c.id == name or name in c.tags}
        if not hit:
            raise ConfigError(f"no case has the id or tag {name!r}",
                              field="improve.validation",
                              hint="Name case ids or tags of the suite, or give a fraction such as 0.25.")
        chosen |= hit
    if len(chosen) == len(cases):
        raise ConfigError("it holds out every case: the improver would see none",
                          field="improve.validation", hint="Hold out fewer cases.")
    return frozenset(chosen)
