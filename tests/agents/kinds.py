"""One support agent, written as each kind a user brings: a prompt on a (scripted)
model, a Python function, an HTTP endpoint speaking cycle's tool protocol, an ADK
agent. All of them behave alike, turn by turn, so one test checks every kind:

- turn 1: look the order up (a mocked tool), then ask which order is meant;
- turn 2: ask the user to approve (a tool answered by a user agent), then say so;
- turn 3 and later: "Refund done."
- an input asking for "refund-now": call ``refund`` (declared, never mocked: its real
  function leaves a marker the test looks for).
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.agents import Agent

from cycle.llm.base import ModelOutput
from cycle.records import ToolCall
from cycle.testing.endpoint import AgentEndpoint

#: the real tools' side effects (none may happen under evaluation unless passed through)
RAN: list[str] = []


def lookup_order(order: str) -> dict:
    """Look an order up in the real order system."""
    RAN.append(f"lookup_order {order}")
    return {"order": order, "real": True}


def refund(order: str) -> dict:
    """Refund an order: a real side effect."""
    RAN.append(f"refund {order}")
    return {"refunded": order}


def approve(question: str) -> dict:
    """Ask the customer to approve (answered by a user agent under evaluation)."""
    RAN.append("approve")
    return {"approved": True}


def next_step(chat: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | str:
    """What the agent does next, from the conversation so far (OpenAI's chat shape):
    a tool call (name, arguments) or its answer to the user's turn."""
    turns = [m for m in chat if m["role"] == "user"]
    last = max(i for i, m in enumerate(chat) if m["role"] == "user")
    results = [m for m in chat[last + 1:] if m["role"] == "tool"]
    said = str(turns[0]["content"])
    if "refund-now" in said:
        return ("refund", {"order": "A-1"}) if not results else "refunded"
    if len(turns) == 1:
        return ("lookup_order", {"order": "A-1"}) if not results else \
            f"Found {results[-1]['content']}. Which order do you mean?"
    if len(turns) == 2:
        return ("approve", {"question": "May I refund A-1?"}) if not results else \
            f"You said {results[-1]['content']}; refunding."
    return "Refund done."


# -- the prompt's (and the ADK agent's) model: a scripted provider ---------------------

def model(messages, tools, config) -> ModelOutput | str:
    step = next_step([m.as_chat() for m in messages])
    if isinstance(step, str):
        return step
    name, arguments = step
    n = sum(1 for m in messages if m.role == "tool")
    return ModelOutput(tool_calls=(ToolCall(id=f"c{n}", name=name, arguments=arguments),))


def user(messages, tools, config) -> dict:
    """The simulated user (a scripted model): done once the refund is done."""
    done = "Refund done" in messages[-1].content
    return {"message": "thanks" if done else "Yes, order A-1, go ahead.", "done": done}


# -- a Python function agent -------------------------------------------------------------

def python_agent(inp, tools, messages):
    chat = [dict(m) for m in messages]
    while True:
        step = next_step(chat)
        if isinstance(step, str):
            return step
        name, arguments = step
        try:
            result = tools.call(name, **arguments)
        except Exception as e:  # noqa: BLE001 - a tool error the agent sees
            result = {"error": str(e)}
        chat += [{"role": "assistant", "content": None},
                 {"role": "tool", "content": json.dumps(result)}]


def python_agent_without_messages(inp, tools):
    return "one turn only"


# -- an HTTP endpoint speaking cycle's tool protocol ------------------------------------

def endpoint_answer(speaks_protocol: bool = True):
    """The endpoint's answer to one POST: its final answer, or (``speaks_protocol``) the
    tool call it asks cycle to run; else it runs the tool itself and reports it."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        step = next_step(body["messages"])
        if isinstance(step, str):
            return {"response": step}
        if speaks_protocol:
            n = sum(1 for m in body["messages"] if m["role"] == "tool")
            return {"tool_calls": [{"id": f"h{n}", "type": "function", "function": {
                "name": step[0], "arguments": json.dumps(step[1])}}]}
        globals()[step[0]](**step[1])
        return {"response": "ran it myself", "toolCalls": [{"name": step[0]}]}

    return answer


def Endpoint(speaks_protocol: bool = True) -> AgentEndpoint:
    """The agent's endpoint on loopback."""
    return AgentEndpoint(endpoint_answer(speaks_protocol), path="/agent")


# -- an ADK agent ------------------------------------------------------------------------

adk_agent = Agent(name="support", model="gemini-2.0-flash",
                  instruction="replaced by the versioned prompt",
                  tools=[lookup_order, refund, approve])
