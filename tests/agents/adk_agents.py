"""ADK agents the tests run (imported by path, as a user's cycle.yaml names them)."""

from google.adk.agents import Agent

CALLS: list[str] = []


def lookup_order(order: str) -> dict:
    """Look an order up in the real order system.

    Args:
      order: The order number, e.g. A-1.
    """
    CALLS.append(f"lookup_order {order}")
    return {"order": order, "status": "shipped"}


def refund(order: str, reason: str = "") -> dict:
    """Refund an order (a real side effect: the tests must never reach it)."""
    CALLS.append(f"refund {order}")
    raise RuntimeError("a real refund was made")


root_agent = Agent(
    name="order_support",
    model="gemini-2.0-flash",  # replaced by cycle's model
    instruction="The agent's own instruction (replaced by the versioned prompt).",
    tools=[lookup_order, refund],
)


def make_agent() -> Agent:
    """A factory, as some projects write them."""
    return root_agent.clone()


not_an_agent = 42


#: an agent with no tools: what cycle improves is its instruction
def count_model_calls(callback_context, llm_request):
    """The agent's own callback: it still runs (and shows that ADK ran the agent)."""
    CALLS.append("model")


plain_agent = Agent(name="SupportReply", model="gemini-2.0-flash",
                    instruction="The agent's own instruction.",
                    before_model_callback=count_model_calls)
