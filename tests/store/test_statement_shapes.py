"""Writing and reading results in batches of every size compiles few statements: each
distinct statement text is compiled and cached by the connection (memory outside
Python's heap, held while the run lasts), and an IN list of n values is a new text for
every n unless its length is padded to a few shapes (cycle.store.params)."""

from __future__ import annotations

import re

from cycle.records import IterationResult, Verdict
from cycle.store import Store
from cycle.store.params import in_list


def result(case: str) -> IterationResult:
    return IterationResult(case_id=case, iteration=0, status="passed", score=80.0, passed=True,
                           input={"q": case}, output=f"out {case}", verdicts=(Verdict(
                               criterion_id="tone", kind="llm", score=80.0, passed=True,
                               weight=1, required=False, reasoning="fine"),))


def test_an_in_list_pads_to_a_power_of_two_with_its_last_value():
    assert in_list(["a"]) == ("?", ["a"])
    assert in_list(["a", "b", "c"]) == ("?,?,?,?", ["a", "b", "c", "c"])
    assert {in_list(list(range(n)))[0].count("?") for n in range(1, 513)} == {
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512}


def test_batches_of_every_size_compile_few_statements(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        store.runs.create(run_id="r", prompt_id="p", version="1.0.0")
        texts: set[str] = set()
        store.db.set_trace_callback(texts.add)
        written = 0
        for size in range(1, 61):  # 60 batches, each of another size
            store.runs.write_results("r", [result(f"c{written + i:04d}") for i in range(size)])
            written += size
        ids = [f"c{i:04d}" for i in range(written)]
        read = {}
        for size in range(1, 61):
            read.update(store.runs.load_cases("r", ids[size:size * 2 + 3]))
        store.db.set_trace_callback(None)
        # every result and its verdict came back, each once
        assert all(len(v) == 1 and v[0].verdicts[0].reasoning == "fine" for v in read.values())
        # the callback sees statements with their values bound: their shapes are the texts
        # with the values taken out again
        shapes = {re.sub(r"'[^']*'|\b\d+\b", "?", t) for t in texts if " IN (" in t}
        assert 0 < len(shapes) <= 3 * 8, len(shapes)  # three statements, a few sizes each
