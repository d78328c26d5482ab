"""A labelled world for ``cycle judge improve`` (its tests and benchmarks/bench_judge.py):
a project whose offline agent's replies differ from case to case, and people who label
them by a rule.

Each case's system prompt (``{{ style }}``) asks for a greeting, an apology, concision and
a sign-off, and, case by case, for the order number and a next step: so the replies differ
in those two only. The one LLM criterion, ``helpful``, has the rubric ``RUBRIC``: a next
step. People label each reply 90 (pass) or 20 (fail) by one of the rules:

- ``needs_order``: a next step *and* the order number. The rubric omits the order number:
  the judge passes replies people fail, and a rule about it is there to learn.
- ``next_step``: a next step, as the rubric says: the judge agrees; nothing to learn.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cycle.testing.offline.world import feature

RUBRIC = "The reply ends with one concrete next step the customer can take."
_ALWAYS = ("Greet the customer by name. Apologise for the trouble the customer has had. "
           "Keep the reply concise: no filler sentences. Sign off with '— The Support Team'.")
_ORDER = "Cite the customer's order number."
_NEXT = "End with one concrete next step, starting with 'Next step:'."
_PEOPLE = ("Ann", "Bruno", "Chen", "Dana", "Eli", "Fay", "Gus", "Hana")
_QUESTIONS = (
    "My parcel was due on Monday and still has not arrived. Where is it?",
    "The lamp I ordered arrived broken. Can I get a replacement?",
    "I ordered the wrong size. Please cancel my order before it ships.",
    "I sent the shoes back two weeks ago. When do I get my refund?",
)

#: a rule people label by: a reply's (score, passed)
People = Callable[[str], tuple[float, bool]]


def needs_order(reply: str) -> tuple[float, bool]:
    """Passes a reply with a next step and the order number."""
    ok = feature("next_step").detect(reply) and feature("order").detect(reply)
    return (90.0, True) if ok else (20.0, False)


def next_step(reply: str) -> tuple[float, bool]:
    """Passes a reply with a next step, as the rubric does."""
    return (90.0, True) if feature("next_step").detect(reply) else (20.0, False)


RULES: dict[str, People] = {"needs_order": needs_order, "next_step": next_step}


def write_project(folder: Path, *, cases: int = 32, seed: int | None = None) -> Path:
    """The project in ``folder``: cycle.yaml (offline models, one iteration a case), the
    prompt, ``cases`` cases; its cycle.yaml. Without ``seed`` the cases take the four
    styles (order number or not, next step or not) in turn; with one, each asks for
    either with probability one half."""
    rng = random.Random(seed)
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    (folder / "cases").mkdir(exist_ok=True)
    (folder / "prompts" / "support.yaml").write_text(
        "id: support\nsystem: 'You are a support agent. {{ style }}'\n"
        "user_template: |\n  Customer: {{ customer }}\n  Order: {{ order }}\n"
        "  Question: {{ question }}\n", encoding="utf-8")
    rows = []
    for i in range(cases):
        order, step = ((rng.random() < 0.5, rng.random() < 0.5) if seed is not None
                       else (i % 2 == 0, i % 4 < 2))
        style = " ".join([_ALWAYS, *([_ORDER] if order else []), *([_NEXT] if step else [])])
        rows.append({"id": f"c{i:03d}", "input": {
            "customer": _PEOPLE[i % len(_PEOPLE)], "order": f"A-{1000 + i}",
            "question": _QUESTIONS[i % len(_QUESTIONS)], "style": style}})
    (folder / "cases" / "all.yaml").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    config = folder / "cycle.yaml"
    config.write_text(
        "prompt: prompts/support.yaml\nagent: offline:default\njudge: offline:default\n"
        "improver: offline:default\n"
        f"criteria:\n  - id: helpful\n    rubric: \"{RUBRIC}\"\n"
        "cases: [cases/*.yaml]\nrun: {iterations: 1}\n", encoding="utf-8")
    return config


def people_labels(outputs: list[dict[str, Any]], run_id: str, people: People, *,
                  flip: float = 0.0, rng: random.Random | None = None,
                  labeler: str = "ann") -> list[dict[str, Any]]:
    """``cycle judge labels import`` lines labelling every output of ``outputs``
    (``store.human_labels.outputs(run_id)``) on ``helpful`` by ``people``; ``flip``: the
    share of verdicts a person gets the other way (``rng`` draws them)."""
    rng = rng or random.Random(0)
    lines = []
    for o in outputs:
        score, passed = people(o["output"])
        if flip and rng.random() < flip:
            score, passed = 110.0 - score, not passed
        lines.append({"run": run_id, "case": o["case"], "iteration": o["iteration"],
                      "criterion": "helpful", "score": score, "pass": passed,
                      "labeler": labeler})
    return lines
