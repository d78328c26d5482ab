"""cycle as a library: a whole cycle built from objects in Python, no cycle.yaml, no CLI."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import cycle
from cycle import (
    AutoReviewer,
    CriterionConfig,
    Improver,
    Judge,
    Loop,
    LoopSettings,
    Prompt,
    PromptAgent,
    Store,
    TestCase,
    get_model,
    parse_stop,
)
from cycle.events import EventBus
from cycle.testing import clear_scripts, script

from .conftest import agent_answer, judge_answer, suggestion

README = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def test_a_whole_cycle_from_objects_with_the_scripted_model(tmp_path: Path) -> None:
    script("agent", agent_answer)
    script("judge", judge_answer)
    script("improver", [{"suggestions": [suggestion("Always say sorry.")]},
                        {"suggestions": [suggestion("Always say order.")]}])
    try:
        store = Store.open(tmp_path / "cycle.db")
        start = store.save_version(Prompt(id="support", system="You help customers."))
        agent_model = get_model("scripted:agent")
        judge_model = get_model("scripted:judge", role="judge")
        cases = [TestCase(id=f"c{i}", input=f"case {i}") for i in range(1, 5)]
        events: list = []
        bus = EventBus()
        bus.subscribe(events.append)
        loop = Loop(
            start=start, cases=cases, agent=lambda prompt: PromptAgent(prompt, agent_model),
            judge=Judge([CriterionConfig(id="quality", rubric="Uses the right keywords.")],
                        model=judge_model),
            improver=Improver(get_model("scripted:improver", role="improver")),
            reviewer=AutoReviewer(), store=store, bus=bus,
            stop=parse_stop({"max_rounds": 2}),
            settings=LoopSettings(acceptance="improved", iterations=2),
        )
        result = asyncio.run(loop.run())
    finally:
        clear_scripts()
    # 40 points less each case's number (mean 2.5); each accepted round adds a keyword
    # the judge rewards with 20
    assert (result.initial_score, result.final_score) == (37.5, 77.5)
    assert [r.accepted for r in result.rounds] == [None, True, True, True]
    assert store.resolve("support@head").version == result.final_version == "1.0.2"
    assert "Always say order." in store.resolve("support@head").prompt.system
    assert store.cycles.get(result.cycle_id).status == "finished"
    assert len(store.runs.load_results(f"{result.cycle_id}-r2")) == 4 * 2
    assert result.offline  # the scripted model says what it is
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".yaml", ".yml")]
    assert any(type(e).__name__ == "CycleFinished" for e in events)
    store.close()


def test_the_readme_library_example_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """The docs' "cycle as a library" block, executed: offline, it improves the prompt."""
    text = README.read_text()
    section = text[text.index("## cycle as a library"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code.group(1), "docs/library.md", "exec"), scope)  # noqa: S102 - our own docs
    result = scope["result"]
    assert result.final_score > result.initial_score
    assert result.final_version != result.initial_version
    assert (tmp_path / "demo.db").exists()
    assert cycle.Loop is Loop
