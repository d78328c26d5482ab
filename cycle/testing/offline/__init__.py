"""The offline model: ``offline:default``, deterministic and without network.

It exists so the quickstart, the tests and the benchmarks run anywhere. It is
a demo and test aid, not a real model: its answers come from a small closed
world of customer-support replies, and every report that uses it says the
results are offline (``Model.offline`` is True; each call's ``raw_response``
carries ``"offline": true``). Same messages in, same output out (``seed`` and
``temperature`` are ignored); a call takes well under a millisecond; usage is
estimated at one token per four characters.
Any model name works (``offline:default`` is the usual one); all behave alike.

The world
---------
A table of *features* of a support reply, shared by the three roles
(``features()`` lists them; ``cycle.testing.offline.world`` holds them):

==========  ==========================================  ==============================
feature     directive the improver proposes             what the agent does
==========  ==========================================  ==============================
greet       Greet the customer by name.                 starts with "Hi {name},"
apologise   Apologise for the trouble the customer      "I'm sorry for the trouble..."
            has had.
order       Cite the customer's order number.           mentions "order #1234"
next_step   End with one concrete next step, starting   adds "Next step: ..."
            with 'Next step:'.
concise     Keep the reply concise: no filler           drops the filler sentences
            sentences.
sign_off    Sign off with '— The Support Team'.         ends with "— The Support Team"
==========  ==========================================  ==============================

Each feature also has a detector (is it in a reply?) and a trigger, a regular
expression that recognises the ask in a system prompt, paraphrases included
("address the customer by their name", "show empathy", "be brief"); an ask in
a clause with "never", "don't", "avoid"... does not count.

Roles
-----
*Agent* (no ``response_schema``). It reads ``Key: value`` lines from the user
messages (``Customer: Ann``, ``Order: 1234``, ``Question: ...``; other lines
make up the question), picks a canned resolution by the question's topic
(damaged, refund, cancel, password, delivery, else a generic one), wraps it in
two filler sentences, then applies every feature the system prompt asks for.
With tools, it first calls the tool whose name shares a word with the last
user message (``lookup_order`` for "where is my order?"), filling arguments
named like order/name/query from the facts, and answers once the tool has.
``max_tokens`` and ``stop`` cut the reply as a model would.

*Judge* (``response_schema_name == "cycle_judge"``). It reads the last
```json block of the last user message (``input``, ``output``, ``expected``,
``criteria``) and scores each criterion 0-100 by keywords of its id and
description: tone/polite/empathy -> greet, apologise, sign_off; personal ->
greet, order; actionable/helpful/next step/step_by_step -> next_step;
concise/brief/clarity -> concise; accuracy/correct/complete -> the topic's
resolution (40), the order number (20) and word overlap with the reference
(20) over a floor of 20; relevance -> topic and order number; consistency ->
the greeted name and cited order number match the input. A feature criterion
scores ``30 + 70 * present / wanted``, where *wanted* are the criterion's
features that the reference reply has (all of them without a reference).
Unknown criteria are judged on all features plus accuracy. The reasoning
names what is missing ("does not greet the customer by name"). The answer is
shaped to the requested schema's property names.
A *rule* in the judge prompt's system message or in a criterion's description
("a reply that does not cite the order number fails") caps the score of a reply
it fails at 20 (cycle.testing.offline.judge_rules).

*Improver* (``response_schema_name == "cycle_improver"``). It reads the
```json block (``prompt``, ``aggregates``, ``low_cases``, ``rejected``),
finds the features the low cases' outputs lack (and their references have),
skips those the system prompt already asks for and those rejected before,
and proposes the directives of the two most often missing ones (ties in
table order) as ``system_prompt`` suggestions that replace the prompt's last
sentence with itself plus the directive. Once every wanted feature is asked
for, it proposes nothing.
Shown the judge prompt (id ``cycle-judge``: ``cycle judge improve``), it
proposes instead the one rule that explains the labelled outputs the judge
passed and people failed (the feature their replies lack).

So from "You are a support agent. Answer the customer's question." three
rounds of accepted suggestions take the judge's mean from about 40 to over
90 on support cases with reference replies.

Other structured requests get the smallest JSON value valid for the schema.
"""

from __future__ import annotations

from cycle.testing.offline.provider import OfflineAPI, last_json_block
from cycle.testing.offline.world import FEATURES, Feature, features

__all__ = ["FEATURES", "Feature", "OfflineAPI", "features", "last_json_block"]
