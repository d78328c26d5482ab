"""``cycle doctor``: a handful of tiny calls that tell what a model's endpoint accepts.

Each probe is one call (a structured one may add its repair): a plain answer, each form of
structured output (cycle.llm.compat), a tool call, whether usage is reported, streaming
(the form cycle uses under a budget on a server that is not OpenAI's), and the latency.
Every call goes through ``Model`` under one ``Budget``, so the cap holds as it does for a
run. The result says what works, what cycle does about what does not, and the settings to
write.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from cycle.errors import BudgetExceededError, CycleError, ProviderError, StructuredOutputError
from cycle.llm import compat
from cycle.llm.base import GenerateConfig, ProviderOptions
from cycle.llm.budget import Budget
from cycle.llm.http import safe_url
from cycle.llm.model import Model, ModelServices, RetryPolicy
from cycle.llm.pricing import PriceTable
from cycle.llm.providers import get_api
from cycle.records import Message, ToolDef

#: the most tokens a probe's answer may take
PROBE_TOKENS = 48
_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
           "required": ["answer"], "additionalProperties": False}
_CLOCK = ToolDef(name="get_time", description="The current time in a city.",
                 parameters={"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]})
#: structured forms probed, with how the report names them
FORMS = {"json_schema": "json_schema", "json_object_schema": "json_object + schema",
         "json_object": "json_object, schema in prompt", "prompt": "schema in prompt"}


class Probe(Struct):
    name: str
    #: True: works; False: does not; None: not probed (does not apply)
    ok: bool | None
    detail: str = ""
    latency: float | None = None


class Diagnosis(Struct):
    model: str
    endpoint: str
    probes: list[Probe] = field(default_factory=list)
    #: what cycle does about what does not work, one sentence each
    notes: list[str] = field(default_factory=list)
    #: settings to write (cycle.yaml key -> value)
    settings: dict[str, Any] = field(default_factory=dict)
    spent: float = 0.0

    @property
    def usable(self) -> bool:
        """A plain answer and some structured form work: a run can be judged here."""
        by = {p.name: p.ok for p in self.probes}
        return bool(by.get("plain answer")) and any(by.get(FORMS[f]) for f in FORMS)


def planned_calls(name: str, official: bool) -> int:
    """The calls ``diagnose`` may make (a structured probe's repair included)."""
    forms = 1 if official or not name.startswith("openai:") else len(FORMS)
    return 2 + 2 * forms


async def diagnose(name: str, options: ProviderOptions | None, *, budget: Budget,
                   pricing: PriceTable | None = None) -> Diagnosis:
    """Probe ``name`` (``provider:model``) with ``options``; every call under ``budget``."""
    options = options or ProviderOptions()
    api = get_api(name, options)
    official = bool(getattr(api, "official", True))
    compatible = name.startswith("openai:") and not official
    # the URL is shown and printed as JSON: never its user, password or ?api-key=
    endpoint = safe_url(getattr(api, "base_url", None)) or "the provider's API"
    out = Diagnosis(model=name, endpoint=endpoint)
    retry = RetryPolicy(attempts=1)
    services = ModelServices(budget=budget, pricing=pricing)

    def model(extra: dict[str, Any] | None = None) -> Model:
        opts = replace(options, extra={**options.extra, **(extra or {})})
        return Model(get_api(name, opts), services, retry=retry,
                     config=GenerateConfig(max_tokens=PROBE_TOKENS, temperature=0))

    async def probe(label: str, call: Any) -> Probe:
        try:
            output = await call
        except BudgetExceededError:
            raise
        except ProviderError as e:
            got = Probe(label, False, f"refused (HTTP {e.status})" if e.status else "refused")
        except StructuredOutputError:
            got = Probe(label, False, "answered, but not JSON of the schema")
        except CycleError as e:
            got = Probe(label, False, e.message[:120])
        else:
            got = Probe(label, True, "", output.latency)
            got.detail = _detail(label, output)
        out.probes.append(got)
        return got

    first: Probe | None = None  # None: the budget stopped the very first call
    try:
        plain = model()
        first = await probe("plain answer", plain.generate([Message.user("Say OK.")]))
        await plain.aclose()
        if first.ok:
            reported = first.detail != "no usage reported"
            out.probes.append(Probe("usage", reported, "reported" if reported else
                                    "none in a streamed answer (how cycle asks a server "
                                    "under a budget)" if compatible else "none in the answer"))
        forms = list(FORMS) if compatible else ["json_schema"]
        for form in forms:
            m = model({"structured": form} if compatible else None)
            await probe(FORMS[form], m.generate_structured(
                [Message.user('Answer with the JSON object {"answer": "ok"}.')], _SCHEMA,
                name="probe"))
            await m.aclose()
        tools = model()
        await probe("tools", tools.generate(
            [Message.user("What time is it in Paris? Call the get_time tool.")], tools=[_CLOCK]))
        await tools.aclose()
    except BudgetExceededError as e:
        out.notes.append(f"stopped at the budget: {e.message}")
    if compatible:
        answered = first is not None and first.ok
        out.probes.append(Probe("streaming", answered, "the form cycle uses under a budget"
                                if answered else "not tried: no plain answer"))
    out.spent = budget.spent
    _advise(out, compatible)
    return out


def _detail(label: str, output: Any) -> str:
    if label == "plain answer" and output.usage_estimated:
        return "no usage reported"
    if label == "tools" and not output.tool_calls:
        return "answered text: the tool was not called"
    return ""


def _advise(out: Diagnosis, compatible: bool) -> None:
    by = {p.name: p for p in out.probes}
    works = [f for f in FORMS if by.get(FORMS[f]) and by[FORMS[f]].ok]
    if compatible and works:
        best = works[0]
        out.settings["providers.openai.structured"] = (
            best if best in compat.STRUCTURED_SETTINGS else "auto")
        if best != "json_schema":
            out.notes.append(f"structured output: json_schema does not work here; cycle uses "
                             f"{FORMS[best]} (learned with one refused call, then kept in the "
                             "store for later runs; the setting skips it)")
    elif not works:
        out.notes.append("structured output: no form worked: the judge and the improver "
                         "cannot run on this model; use another one for them")
    tools = by.get("tools")
    if tools is not None and tools.ok and tools.detail:
        tools.ok = False
        out.notes.append("tools: the model answered without calling the tool: an agent with "
                         "tools will not work on it")
    usage = by.get("usage")
    if usage is not None and not usage.ok:
        out.notes.append("usage: the answers carry no token counts: cycle estimates them "
                         "(costs are marked estimated)")
    latencies = [p.latency for p in out.probes if p.ok and p.latency]
    if latencies:
        typical = statistics.median(latencies)
        out.probes.append(Probe("latency", True, f"{typical:.2f} s a call (median)", typical))
        # a case makes about three calls (the agent's, the judge's, a repair or a tool turn)
        fit = max(60, math.ceil(2 * 3 * typical / 10) * 10)
        if fit > 60:
            out.settings["run.timeout"] = fit
            out.notes.append(f"latency: {typical:.1f} s a call: set run.timeout: {fit} so that a "
                             "case is not cut for the server's speed")
