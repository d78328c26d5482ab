"""Model names, providers and credentials."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from cycle.errors import MissingCredentialsError, UnknownProviderError
from cycle.llm.base import ProviderOptions
from cycle.llm.registry import get_model, parse_model_name, register_provider
from cycle.records import Message
from cycle.testing import ScriptedAPI


def test_missing_openai_key_names_the_variable():
    with pytest.raises(MissingCredentialsError) as info:
        get_model("openai:gpt-4o-mini")
    assert "OPENAI_API_KEY" in str(info.value)
    assert info.value.exit_code == 2


def test_missing_gemini_key_names_both_variables(monkeypatch):
    secret = "sk-proj-THISISASECRETKEY1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # a key for another provider
    with pytest.raises(MissingCredentialsError) as info:
        get_model("gemini:gemini-2.5-flash")
    text = str(info.value)
    assert "GEMINI_API_KEY" in text and "GOOGLE_API_KEY" in text
    assert secret not in text


def test_key_from_environment_is_used_and_never_shown(monkeypatch):
    secret = "sk-proj-THISISASECRETKEY1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    model = get_model("openai:gpt-4o-mini")
    assert secret not in repr(model) and secret not in repr(model.api)
    assert secret not in str(msgspec.structs.asdict(model.api.options))


def test_compatible_server_runs_without_a_key(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    assert get_model("openai:llama3.1:8b").name == "openai:llama3.1:8b"
    assert get_model("gemini:g", options=ProviderOptions(base_url="http://127.0.0.1:1")).name


def test_unknown_provider_lists_the_known_ones():
    with pytest.raises(UnknownProviderError) as info:
        get_model("anthropic:claude")
    text = str(info.value)
    for name in ("openai", "gemini", "offline"):
        assert name in text
    assert "scripted" not in text  # cycle's test provider is not offered (issue 33)


def test_name_without_provider_shows_the_form():
    with pytest.raises(UnknownProviderError) as info:
        parse_model_name("gpt-4o-mini")
    text = str(info.value)
    assert "provider:model" in text and "openai:gpt-4o-mini" in text


def test_model_names_keep_colons_after_the_provider():
    assert parse_model_name("openai:llama3.1:8b") == ("openai", "llama3.1:8b")


async def test_register_provider_with_a_factory(monkeypatch):
    from cycle.llm import providers as registry

    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("echo", lambda name, opts: ScriptedAPI(name, outputs=lambda m, t, c: name))
    model = get_model("echo:hello")
    assert (await model.generate([Message.user("x")])).text == "hello"


def test_scripted_provider_by_name():
    from cycle.testing import script

    with script("named", ["hi"]):
        model = get_model("scripted:named")
        assert model.offline
        assert model.generate_sync([Message.user("x")]).text == "hi"
    with pytest.raises(Exception, match="script"):
        get_model("scripted:named")


def test_offline_and_scripted_come_from_entry_points_not_from_the_model_layer():
    """The model layer names no test support: the offline world and the scripted model are
    found through the ``cycle.providers`` entry-point group, as a third party's would be."""
    from importlib.metadata import entry_points

    from cycle.llm import providers as registry

    declared = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert declared == {"offline": "cycle.testing.offline:OfflineAPI",
                        "scripted": "cycle.testing.scripted:ScriptedAPI"}
    source = "".join(p.read_text() for p in Path(registry.__file__).parent.glob("*.py"))
    assert "cycle.testing" not in source
    assert {"offline", "scripted", "openai", "gemini"} <= set(registry.providers(internal=True))
    assert "scripted" not in registry.providers()  # a test provider, not offered to users
    assert registry.get_api("offline:default").offline
