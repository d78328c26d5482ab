"""A transcript for people is never cut (reports and screens wrap it); what a model is
sent cuts each long text with a marker."""

from __future__ import annotations

from cycle.records import TraceEvent
from cycle.records.transcript import transcript_lines

LONG = "The refund for order A-17 was approved. " * 30  # 1,200 characters, one answer


def test_people_read_the_whole_answer_a_model_a_cut_one():
    trace = [TraceEvent(kind="user", text="refund?"), TraceEvent(kind="model", text=LONG),
             TraceEvent(kind="user", text="thanks"), TraceEvent(kind="model", text="ok"),
             TraceEvent(kind="final", text="ok", reason="the scripted turns were all said")]
    people = transcript_lines(trace, for_people=True)
    assert f"assistant: {LONG}" in people
    assert people[-1] == "ended: the scripted turns were all said"
    model = transcript_lines(trace)
    assert "characters cut ..." in model[1] and len(model[1]) < 500
    assert not any(line.startswith("ended:") for line in model)
