import pytest

from cycle.errors import TemplateError
from cycle.prompts.template import check_templates, render_user
from cycle.records import Prompt


def test_identical_content_same_hash_metadata_ignored():
    a = Prompt(id="p", system="s", user_template="{{ q }}", metadata={"x": 1})
    b = Prompt(id="p", system="s", user_template="{{ q }}")
    assert a.content_hash == b.content_hash
    assert a.content_hash != Prompt(id="p", system="s2", user_template="{{ q }}").content_hash


def test_render_strict_undefined_names_given_variables():
    p = Prompt(id="p", user_template="Hi {{ name }}")
    assert render_user(p, {"name": "Ann"}) == "Hi Ann"
    with pytest.raises(TemplateError) as e:
        render_user(p, {"other": 1})
    assert "name" in str(e.value) and "other" in str(e.value)


def test_sandbox_blocks_dunder_access():
    p = Prompt(id="p", user_template="{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(TemplateError):
        render_user(p, {})


def test_syntax_error_names_field_and_line():
    p = Prompt(id="p", system="ok\n{% if %}")
    with pytest.raises(TemplateError) as e:
        check_templates(p)
    assert "system" in str(e.value) and e.value.field == "system" and e.value.line == 2


@pytest.mark.parametrize(
    "template", ["{{ 1/0 }}", "{{ input + 1 }}", "{% include 'other.txt' %}", "{{ range(10**9) | list }}"]
)
def test_a_template_failing_at_render_is_a_template_error(template):
    p = Prompt(id="p", user_template=template)
    with pytest.raises(TemplateError) as e:
        render_user(p, {"input": "text"})
    assert e.value.field == "user_template" and "failed to render" in str(e.value)


class _Loud:
    def __str__(self) -> str:
        return "LOUD"


class _Broken:
    def __str__(self) -> str:
        raise ValueError("no text")


VALUES = {"input": "Bonjour {{ x }} {% y %}\r\n", "n": 3, "f": 0.1, "none": None, "flag": True,
          "items": [1, "a", {"k": None}], "mapping": {"a": [1, 2]}, "obj": _Loud(), "empty": "",
          "range": "mine", "x_1": "u\u00e9\n"}

#: templates on either side of what renders without jinja2 (text and {{ name }} only)
TEMPLATES = [
    "", "plain text, no tags", "{{ input }}", "{{input}}", "{{\tn\t}}", "Q: {{ input }}\nA:",
    "{{ input }}{{ n }}{{ f }}", "{{ flag }} {{ items }} {{ mapping }} {{ obj }}",
    "{{ none }} {{ flag }}",
    "trailing newline\n{{ empty }}\n\n", "{{ x_1 }}", "a } b { c }} d", "{ {{ n }} }", "{{ range }}",
    "{{ n }}}", "{{{ n }}", "{{- n }}", "{{ n -}}", "{{ n | upper }}", "{{ mapping.a }}",
    "{{ items[0] }}", "{# note #}{{ n }}", "{% if n %}{{ n }}{% endif %}", "{{ true }}", "{{ none }}x",
    "{{ self }}", "{{ loop }}", "line\r\nbreak {{ n }}", "{{ 'literal' }}", "{{ n }}\n{{ \n n }}",
    "{% raw %}{{ n }}{% endraw %}", "{{ not }}", "{{ \u00e9 }}",
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_a_template_renders_as_jinja2_renders_it(template):
    """Whichever way a template goes (text and {{ name }} placeholders skip jinja2),
    what it renders, or the error it raises, is jinja2's own."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                               keep_trailing_newline=True)
    try:
        expected: object = env.from_string(template).render(**VALUES)
    except jinja2.TemplateError as e:
        expected = type(e)
    p = Prompt(id="p", user_template=template)
    try:
        got: object = render_user(p, VALUES)
    except TemplateError as e:
        got = type(e.__cause__)
    assert got == expected


def test_a_placeholder_without_its_variable_is_jinja2s_undefined_error():
    p = Prompt(id="p", user_template="Q: {{ question }}")
    with pytest.raises(TemplateError) as e:
        render_user(p, {"input": "x"})
    assert "'question' is undefined" in str(e.value) and "input" in str(e.value)


def test_a_value_that_cannot_be_text_is_a_template_error():
    p = Prompt(id="p", user_template="Q: {{ input }}")
    with pytest.raises(TemplateError) as e:
        render_user(p, {"input": _Broken()})
    assert e.value.field == "user_template" and "ValueError: no text" in str(e.value)


def test_text_and_placeholders_render_without_loading_jinja2():
    """jinja2 is a quarter of a run's start-up over the bare SDK: a prompt of text and
    {{ name }} placeholders never loads it; a tag does."""
    import subprocess
    import sys

    code = ("import sys; from cycle.records import Prompt; from cycle.prompts.template import "
            "check_templates, render_user; p = Prompt(id='p', system='You answer.', "
            "user_template=sys.argv[1]); check_templates(p); print(render_user(p, {'input': 'hi'}), "
            "'jinja2' in sys.modules)")
    for template, loaded in [("Q: {{ input }}", "False"), ("{{ input | upper }}", "True")]:
        done = subprocess.run([sys.executable, "-c", code, template], check=True,
                              capture_output=True, text=True)
        assert done.stdout.split()[-1] == loaded, (template, done.stdout)


@pytest.mark.parametrize("source", [
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "{{ 'A' * 3000000000 }}",
    "{% for a in 'x' * 100000 %}{% for b in 'x' * 100000 %}{% endfor %}{% endfor %}",
    "{{ 10 ** (10 ** 9) }}",
])
def test_a_template_bomb_is_an_error_naming_the_template_not_a_hang(source):
    """Issue 32: nested range(99999) loops hung a run (a --yes cycle too, from an improver
    edit); a huge repetition ended it in a MemoryError. Both are the template's error now."""
    import time

    from cycle.errors import TemplateError
    from cycle.prompts.template import render

    began = time.monotonic()
    with pytest.raises(TemplateError) as e:
        render(source, {"q": "hi"}, field="conversation.follow_ups")
    assert time.monotonic() - began < 2.0
    assert e.value.field == "conversation.follow_ups" and "template stopped" in e.value.message


def test_a_template_within_its_budget_renders_as_before():
    from cycle.prompts.template import render

    src = "{% for i in range(1000) %}{{ i % 10 }}{% endfor %}{{ '-' * 20 }}{{ 2 ** 64 }} {{ q }}"
    assert render(src, {"q": "hi"}) == "0123456789" * 100 + "-" * 20 + str(2 ** 64) + " hi"
