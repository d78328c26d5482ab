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


def test_people_see_which_agent_made_each_model_turn_and_a_judge_is_sent_what_it_was():
    from cycle.records import ToolCall

    trace = [TraceEvent(kind="user", text="refund?"),
             TraceEvent(kind="model", agent="researcher",
                        tool_calls=(ToolCall(id="1", name="lookup_order",
                                             arguments={"order": "A-1"}),)),
             TraceEvent(kind="model", agent="writer", text="Refunded."),
             TraceEvent(kind="model", text="No agent named.")]
    assert transcript_lines(trace, for_people=True)[1:] == [
        "assistant [researcher] -> lookup_order(order=A-1)", "assistant [writer]: Refunded.",
        "assistant: No agent named."]
    assert transcript_lines(trace)[1:] == [  # the judge's prompt (and its cache) unchanged
        "assistant -> lookup_order(order=A-1)", "assistant: Refunded.",
        "assistant: No agent named."]
