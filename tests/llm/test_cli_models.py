"""``cycle models``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cycle.cli import cli


def test_models_json_lists_providers_and_prices(monkeypatch):
    secret = "sk-proj-SECRETSECRETSECRET123"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    result = CliRunner().invoke(cli, ["models", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    by_name = {p["provider"]: p for p in data["providers"]}
    assert by_name["openai"]["key_set"] and not by_name["gemini"]["key_set"]
    assert {"openai", "gemini", "offline"} <= set(by_name) and "scripted" not in by_name
    prices = {row["model"]: row for row in data["prices"]}
    assert prices["gpt-4o-mini"]["input"] == 0.15
    assert secret not in result.output


def test_models_table_says_which_variable_to_set():
    result = CliRunner().invoke(cli, ["models"])
    assert result.exit_code == 0
    assert "set OPENAI_API_KEY" in result.output and "gemini-2.5-flash" in result.output
