"""The offline world: a closed set of reply features the three roles share.

A *feature* is one quality of a customer-support reply (greets by name,
apologises, cites the order number, ...). Each one has a detector (is it in
this text?), a directive (the sentence the improver adds to a system prompt),
a trigger (does this system prompt ask for it?) and a transform (how the agent
adds it to its draft). The agent, the judge and the improver all read this
table, which is why an improvement cycle on the offline model converges.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from msgspec import Struct, field

_I = re.IGNORECASE

# -- what the agent reads from a user message ------------------------------------------

_KEY_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z _-]{0,30}?)\s*:\s*(.+?)\s*$")
_NAME_KEYS = {"customer", "name", "customer name", "customer_name", "from", "user"}
_ORDER_KEYS = {"order", "order number", "order id", "order_id", "order_number", "order no", "order #"}
_QUESTION_KEYS = {"question", "message", "issue", "request", "problem", "query", "text", "body"}
_ORDER_NUMBER = re.compile(r"#?\s?([A-Z]{0,3}-?\d{3,})", _I)


class Facts(Struct, frozen=True):
    """What a user message says: who asks, about which order, and what."""

    customer: str | None = None
    order: str | None = None
    question: str = ""


def parse_facts(source: Any) -> Facts:
    """Read ``Key: value`` lines (Customer, Order, Question) from text or a dict.

    Lines that are not ``Key: value`` pairs of a known key make up the
    question when no ``Question:`` line is given.
    """
    if isinstance(source, dict):
        text = "\n".join(f"{k}: {v}" for k, v in source.items() if not isinstance(v, (dict, list)))
    elif source is None:
        text = ""
    else:
        text = str(source)
    customer = order = question = None
    rest: list[str] = []
    for line in text.splitlines():
        m = _KEY_LINE.match(line)
        key = m.group(1).strip().lower().replace("-", " ") if m else ""
        if m and key in _NAME_KEYS and customer is None:
            customer = m.group(2).split()[0].strip(",.") if m.group(2).split() else None
        elif m and key in _ORDER_KEYS and order is None:
            found = _ORDER_NUMBER.search(m.group(2))
            order = found.group(1) if found else None
        elif m and key in _QUESTION_KEYS and question is None:
            question = m.group(2)
        elif line.strip():
            rest.append(line.strip())
    return Facts(customer=customer, order=order, question=question or " ".join(rest))


# -- topics: the substance of an answer --------------------------------------------------


class Topic(Struct, frozen=True):
    """A kind of question, with the canned resolution and next step the agent gives."""

    name: str
    keywords: re.Pattern[str]
    resolution: str
    next_step: str


TOPICS: tuple[Topic, ...] = (
    Topic(
        "damaged",
        re.compile(r"\b(damaged?|broken|defective|cracked|faulty|smashed|replacement)\b", _I),
        "We will send you a free replacement right away.",
        "Next step: reply with a photo of the damaged item so we can ship the replacement.",
    ),
    Topic(
        "refund",
        re.compile(r"\b(refunds?|refunded|money back|reimburse\w*)\b", _I),
        "Your refund has been approved and will be back on your original payment method "
        "within 5 business days.",
        "Next step: watch for the confirmation email, and reply to it if the money is not "
        "there by then.",
    ),
    Topic(
        "cancel",
        re.compile(r"\b(cancel\w*|unsubscribe)\b", _I),
        "Your order has been cancelled and you will not be charged.",
        "Next step: look for the cancellation confirmation in your inbox.",
    ),
    Topic(
        "password",
        re.compile(r"\b(password|log ?in|sign ?in|locked out|reset)\b", _I),
        "You can reset your password from the sign-in page with the 'Forgot password' link.",
        "Next step: open the reset link we email you within 15 minutes.",
    ),
    Topic(
        "delivery",
        re.compile(r"\b(deliver\w*|shipping|shipped|shipment|package|parcel|arriv\w*|tracking|"
                   r"late|courier|where is)\b", _I),
        "Your parcel is on its way and should arrive within 2 business days.",
        "Next step: follow it with the tracking link in your shipping email.",
    ),
)
GENERIC = Topic(
    "general",
    re.compile(r"(?!x)x"),
    "We have passed your question to the right team and will get back to you within one "
    "business day.",
    "Next step: reply to this email with any details that might help us.",
)


def topic_of(text: str) -> Topic:
    """The topic whose keywords occur most often; ties go to the earlier topic."""
    best, hits = GENERIC, 0
    for topic in TOPICS:
        n = len(topic.keywords.findall(text or ""))
        if n > hits:
            best, hits = topic, n
    return best


# -- the draft the agent builds ---------------------------------------------------------

FILLER_OPEN = ("Thank you for contacting our support team; we value your business and "
               "appreciate your patience while we look into this.")
FILLER_CLOSE = "Let us know if there is anything else we can help you with."
SIGN_OFF = "— The Support Team"


class Draft(Struct):
    """A reply under construction; features edit it, ``render`` writes it."""

    facts: Facts
    topic: Topic
    greeting: str | None = None
    opening: list[str] = field(default_factory=list)
    apology: bool = False
    cite_order: bool = False
    body: list[str] = field(default_factory=list)
    closing: list[str] = field(default_factory=list)
    signature: str | None = None

    @classmethod
    def base(cls, facts: Facts) -> Draft:
        """The bare answer: filler, the canned resolution, more filler."""
        topic = topic_of(facts.question)
        return cls(facts=facts, topic=topic, opening=[FILLER_OPEN], body=[topic.resolution],
                   closing=[FILLER_CLOSE])

    def render(self) -> str:
        lead: list[str] = []
        order = self.facts.order
        if self.apology and self.cite_order and order:
            lead.append(f"I'm sorry for the trouble with order #{order}.")
        elif self.apology:
            lead.append("I'm sorry for the trouble.")
        elif self.cite_order and order:
            lead.append(f"I have looked into order #{order}.")
        paragraph = " ".join([*self.opening, *lead, *self.body, *self.closing])
        lines = [x for x in (self.greeting, paragraph, self.signature) if x]
        return "\n".join(lines)


# -- the features -----------------------------------------------------------------------

_NEGATION = re.compile(r"\b(never|don'?t|do not|avoid|no need to|without)\b", _I)
_CLAUSE_END = re.compile(r"[.!?;\n]")


def _cached(detect: Callable[[str], bool]) -> Callable[[str], bool]:
    # the judge and the improver ask about the same few texts many times
    return lru_cache(maxsize=4096)(detect)


def _present(pattern: str, flags: int = _I, needs: tuple[str, ...] = ()) -> Callable[[str], bool]:
    """A detector: the pattern occurs (and, checked first because it is cheap, one of ``needs``)."""
    rx = re.compile(pattern, flags)

    def detect(text: str) -> bool:
        if needs and not any(w in (text or "").lower() for w in needs):
            return False
        return bool(rx.search(text or ""))

    return _cached(detect)


_FILLER = re.compile(
    r"thank(s| you) for (contacting|reaching out|getting in touch|your (message|email|patience))"
    r"|we (value|appreciate) your (business|patience)"
    r"|(let us know|don'?t hesitate|do not hesitate|feel free)[^.\n]*(anything else|questions?|help)"
    r"|hope this (helps|email finds you)",
    _I,
)
#: more words than this is not concise, filler or not
CONCISE_WORDS = 90


_FILLER_WORDS = ("thank", "value", "appreciate", "let us know", "hesitate", "feel free", "hope this")


def filler_sentences(text: str) -> int:
    """How many filler phrases a text has (thanks for contacting us, let us know...)."""
    lower = (text or "").lower()
    if not any(w in lower for w in _FILLER_WORDS):  # a cheap test first: the regex is slow
        return 0
    return len(_FILLER.findall(text))


def _concise(text: str) -> bool:
    return filler_sentences(text) == 0 and len((text or "").split()) <= CONCISE_WORDS


def _greet(d: Draft) -> None:
    d.greeting = f"Hi {d.facts.customer}," if d.facts.customer else "Hello,"


def _apologise(d: Draft) -> None:
    d.apology = True


def _cite_order(d: Draft) -> None:
    d.cite_order = True


def _next_step(d: Draft) -> None:
    d.closing.insert(0, d.topic.next_step)


def _concise_edit(d: Draft) -> None:
    d.opening = [s for s in d.opening if not _FILLER.search(s)]
    d.closing = [s for s in d.closing if not _FILLER.search(s)]


def _sign_off(d: Draft) -> None:
    d.signature = SIGN_OFF


class Feature(Struct, frozen=True):
    """One quality of a reply that the offline agent, judge and improver agree on."""

    #: short id, e.g. "greet"
    name: str
    #: what it is, in words ("greets the customer by name")
    present_phrase: str
    #: what the judge says when it is missing ("does not greet the customer by name")
    missing_phrase: str
    #: the sentence the improver proposes for the system prompt
    directive: str
    #: matches a system prompt that asks for it (paraphrases included)
    trigger: re.Pattern[str]
    #: whether a reply text has it
    detect: Callable[[str], bool]
    #: how the agent adds it to a draft
    transform: Callable[[Draft], None]
    #: False when the feature needs facts the input lacks (no order number to cite)
    applies: Callable[[Facts], bool] = lambda facts: True

    def requested_by(self, system_prompt: str) -> bool:
        """Whether a system prompt asks for this feature (and does not negate the ask)."""
        text = system_prompt or ""
        for m in self.trigger.finditer(text):
            start = max((e.end() for e in _CLAUSE_END.finditer(text, 0, m.start())), default=0)
            if not _NEGATION.search(text, start, m.start()):
                return True
        return False


FEATURES: tuple[Feature, ...] = (
    Feature(
        name="greet",
        present_phrase="greets the customer by name",
        missing_phrase="does not greet the customer by name",
        directive="Greet the customer by name.",
        trigger=re.compile(
            r"\bgreet\w*\b|\b(address|salute|welcome)\w*\b[^.\n]{0,40}\bname\b"
            r"|\b(use|using|mention)\b[^.\n]{0,30}\bname\b"
            r"|\bby (their |his |her |the customer'?s? )?(first )?name\b",
            _I,
        ),
        detect=_present(r"^\s*(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening))\s+[A-Z]",
                        0),
        transform=_greet,
    ),
    Feature(
        name="apologise",
        present_phrase="apologises for the trouble",
        missing_phrase="does not apologise for the trouble",
        directive="Apologise for the trouble the customer has had.",
        trigger=re.compile(
            r"\bapolog\w*|\bsay (you are |you're )?sorry\b|\bexpress\w* (regret|empathy|sympathy)"
            r"|\bempathi[sz]\w*|\bshow empathy\b"
            r"|\backnowledge\w*\b[^.\n]{0,40}\b(frustration|inconvenience|trouble|problem)",
            _I,
        ),
        detect=_present(r"\b(sorry|apolog\w+|regret)\b"),
        transform=_apologise,
    ),
    Feature(
        name="order",
        present_phrase="cites the order number",
        missing_phrase="does not cite the order number",
        directive="Cite the customer's order number.",
        trigger=re.compile(
            r"\border (number|no\b|id\b|#)"
            r"|\b(cite|mention|include|reference|quote|state|repeat|confirm)\w*\b[^.\n]{0,40}\border\b",
            _I,
        ),
        detect=_present(r"#\s?[A-Z]{0,3}-?\d{3,}|\border\s+(number\s+|no\.?\s*|id\s+)?#?\d{3,}"),
        transform=_cite_order,
        applies=lambda facts: bool(facts.order),
    ),
    Feature(
        name="next_step",
        present_phrase="gives a concrete next step",
        missing_phrase="does not give the customer a concrete next step",
        directive="End with one concrete next step, starting with 'Next step:'.",
        trigger=re.compile(
            r"\bnext steps?\b|\bactionable\b|\bconcrete (action|step)s?\b"
            r"|\bwhat (to|they should|the customer should) do next\b|\bcall to action\b",
            _I,
        ),
        detect=_present(r"\bnext steps?\b|\bplease (reply|click|check|visit|call|follow|send|open)\b"),
        transform=_next_step,
    ),
    Feature(
        name="concise",
        present_phrase="is concise",
        missing_phrase="is not concise: it has filler sentences",
        directive="Keep the reply concise: no filler sentences.",
        trigger=re.compile(r"\b(concise|brief|succinct|terse|to the point|no filler|short)\b", _I),
        detect=_cached(_concise),
        transform=_concise_edit,
    ),
    Feature(
        name="sign_off",
        present_phrase="signs off",
        missing_phrase="does not sign off",
        directive=f"Sign off with '{SIGN_OFF}'.",
        trigger=re.compile(
            r"\bsign(ing)?[- ]?off\b|\bsign (with|as)\b|\bsignature\b"
            r"|\bclos(e|ing) (with|line|salutation)\b"
            r"|\bend (with|the reply with|your reply with)\b[^.\n]{0,30}\b(team|regards|name)\b",
            _I,
        ),
        detect=_present(r"(—|–|--|-)\s*(the\s+)?[\w ]{0,30}\bteam\b|\b(best|kind|warm)\s+regards\b"
                        r"|\bsincerely\b|\bcheers\b",
                        needs=("team", "regards", "sincerely", "cheers")),
        transform=_sign_off,
    ),
)

_BY_NAME = {f.name: f for f in FEATURES}


def features() -> tuple[Feature, ...]:
    """Every feature of the offline world, in the order the agent applies them."""
    return FEATURES


def feature(name: str) -> Feature:
    """One feature by name (KeyError if unknown)."""
    return _BY_NAME[name]


def requested(system_prompt: str) -> list[Feature]:
    """The features a system prompt asks for."""
    return [f for f in FEATURES if f.requested_by(system_prompt)]


def answer(system_prompt: str, facts: Facts, shown: tuple[str, ...] = ()
           ) -> tuple[str, list[str]]:
    """The agent's reply to ``facts`` under ``system_prompt``, and the features it applied:
    those the system prompt asks for and those the answers ``shown`` as examples have."""
    draft = Draft.base(facts)
    applied = []
    for f in FEATURES:
        if not (f.requested_by(system_prompt) or any(f.detect(text) for text in shown)):
            continue
        f.transform(draft)
        applied.append(f.name)
    return draft.render(), applied
