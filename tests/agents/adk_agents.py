"""ADK agents the tests run (imported by path, as a user's cycle.yaml names them)."""

from google.adk.agents import Agent
from google.adk.code_executors import UnsafeLocalCodeExecutor
from google.adk.tools import ToolContext

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


# -- the edges: a tool that takes ADK's ToolContext, a hand-off, a code executor ----------

def remember_order(order: str, tool_context: ToolContext) -> dict:
    """Remember the order in the session state (reads what the case's state holds).

    Args:
      order: The order number.
    """
    seen = tool_context.state.get("user:orders_seen", 0)
    tool_context.state["last_order"] = order
    tool_context.state["user:orders_seen"] = seen + 1
    return {"remembered": order, "seen_before": seen}


refund_agent = Agent(name="refunds", model="gemini-2.0-flash",
                     description="Handles refunds.", instruction="You handle refunds.",
                     tools=[refund])

handing_off_agent = Agent(
    name="front_desk", model="gemini-2.0-flash", instruction="Route the customer.",
    tools=[remember_order], sub_agents=[refund_agent])

coding_agent = Agent(
    name="front_desk", model="gemini-2.0-flash", instruction="Route the customer.",
    sub_agents=[Agent(name="analyst", model="gemini-2.0-flash", instruction="Compute.",
                      code_executor=UnsafeLocalCodeExecutor())])


# -- hostile agents: one that raises, one that never answers -------------------------------

def explode(callback_context, llm_request):
    """The agent's own callback breaks (and says a secret of the environment)."""
    import os

    raise RuntimeError(f"the agent broke with key {os.environ.get('GEMINI_API_KEY')} \x1b]0;x\x07 \ud800")


raising_agent = Agent(name="raiser", model="gemini-2.0-flash", instruction="Break.",
                      before_model_callback=explode)


def _silent_agent():
    from google.adk.agents import BaseAgent

    class Silent(BaseAgent):
        """An agent that ends its invocation without a single event."""

        async def _run_async_impl(self, ctx):
            return
            yield  # an async generator

    return Silent(name="silent")


#: a root that hands the turn to a sub-agent that says nothing: no final response
silent_router = Agent(name="router", model="gemini-2.0-flash", instruction="Route.",
                      sub_agents=[_silent_agent()])


# -- workflow roots: ADK runs the steps, cycle routes every LlmAgent of them ---------------

def workflow_agent():
    """A workflow root with one LlmAgent: it takes the prompt."""
    from google.adk.agents import SequentialAgent

    return SequentialAgent(name="steps", sub_agents=[Agent(
        name="step", model="gemini-2.0-flash", instruction="Step.")])


def pipeline():
    """Two steps: one looks the order up, the next answers (and may refund)."""
    from google.adk.agents import SequentialAgent

    return SequentialAgent(name="pipeline", sub_agents=[
        Agent(name="researcher", model="gemini-2.0-flash", instruction="Look the order up.",
              tools=[lookup_order]),
        Agent(name="writer", model="gemini-2.0-flash", instruction="Answer the customer.",
              tools=[refund])])


def refining_loop():
    """A LoopAgent of two steps, ended by the critic's exit_loop or by max_iterations."""
    from google.adk.agents import LoopAgent
    from google.adk.tools import exit_loop

    return LoopAgent(name="refine", max_iterations=2, sub_agents=[
        Agent(name="drafter", model="gemini-2.0-flash", instruction="Draft a reply."),
        Agent(name="critic", model="gemini-2.0-flash", instruction="Critique the draft.",
              tools=[exit_loop])])


def fan_out():
    """Two branches at once (ADK runs them as concurrent tasks), then a summary step."""
    from google.adk.agents import ParallelAgent, SequentialAgent

    return SequentialAgent(name="review", sub_agents=[
        ParallelAgent(name="branches", sub_agents=[
            Agent(name="tone", model="gemini-2.0-flash", instruction="Judge the tone."),
            Agent(name="facts", model="gemini-2.0-flash", instruction="Check the facts.",
                  tools=[lookup_order])]),
        Agent(name="summary", model="gemini-2.0-flash", instruction="Sum up.")])


def _custom_root():
    from google.adk.agents import BaseAgent

    class Custom(BaseAgent):
        """A root that runs what its own code says: cycle cannot see inside."""

        async def _run_async_impl(self, ctx):
            return
            yield  # an async generator

    return Custom(name="custom", sub_agents=[Agent(
        name="inner", model="gemini-2.0-flash", instruction="Inner.")])


custom_root = _custom_root()


# -- ADK 2's graph Workflow: its nodes run in its graph's order -----------------------------

def _note(node_input: str) -> str:
    """A plain function node: the workflow's own code, between two LlmAgents."""
    CALLS.append("note")
    return f"Research notes: {node_input}"


def graph_workflow():
    """A Workflow of an LlmAgent, a function node and another LlmAgent, in a chain."""
    from google.adk.workflow import Workflow

    return Workflow(name="graph", edges=[("START",
        Agent(name="researcher", model="gemini-2.0-flash", instruction="Look the order up.",
              tools=[lookup_order]),
        _note,
        Agent(name="writer", model="gemini-2.0-flash", instruction="Answer the customer.",
              tools=[refund]))])


def _sign(node_input: str) -> str:
    """A function node that ends the workflow: its output is the turn's answer."""
    return f"{node_input} -- Acme support"


def signed_workflow():
    """A Workflow whose last node is a function: an LlmAgent's answer, signed."""
    from google.adk.workflow import Workflow

    return Workflow(name="signed", edges=[("START", Agent(
        name="replier", model="gemini-2.0-flash", instruction="Reply."), _sign)])


def _nested_workflow():
    """A Workflow with a Workflow as one of its nodes (made once, at import: cycle must not
    change the user's object)."""
    from google.adk.workflow import Workflow

    inner = Workflow(name="inner", edges=[("START", Agent(
        name="checker", model="gemini-2.0-flash", instruction="Check the facts."))])
    return Workflow(name="outer", edges=[("START", inner, Agent(
        name="answerer", model="gemini-2.0-flash", instruction="Answer."))])


nested_workflow = _nested_workflow()


_hidden = Agent(name="hidden", model="gemini-2.0-flash", instruction="Run by code.")


async def _run_hidden(ctx, node_input: str):
    """A function node that runs an LlmAgent itself (ADK's dynamic node): not in the graph."""
    return await ctx.run_node(_hidden, node_input)


def dynamic_workflow():
    """A Workflow whose function node runs an LlmAgent of its own with ctx.run_node."""
    from google.adk.workflow import FunctionNode, Workflow

    return Workflow(name="dynamic", edges=[("START", Agent(
        name="front", model="gemini-2.0-flash", instruction="Front."),
        FunctionNode(func=_run_hidden, rerun_on_resume=True))])


def tool_node_workflow():
    """A Workflow with a tool as one of its nodes: the refund runs with no model asking."""
    from google.adk.tools import FunctionTool
    from google.adk.workflow import Workflow

    return Workflow(name="tooling", edges=[("START", Agent(
        name="front", model="gemini-2.0-flash", instruction="Front."), FunctionTool(refund))])
