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
