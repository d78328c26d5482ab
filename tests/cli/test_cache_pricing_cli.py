"""The response cache and price overrides as a user meets them through `cycle run`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from cycle.cli import cli
from cycle.testing import LoopbackServer, Reply


def _project(tmp_path: Path, base_url: str, extra: str = "", model: str = "gpt-4o-mini") -> Path:
    (tmp_path / "prompts").mkdir(exist_ok=True)
    (tmp_path / "cases").mkdir(exist_ok=True)
    (tmp_path / "prompts" / "p.yaml").write_text(
        'id: p\nsystem: Be brief.\nuser_template: "{{ q }}"\n')
    (tmp_path / "cases" / "c.yaml").write_text(
        "- id: a\n  input: {q: one}\n- id: b\n  input: {q: two}\n")
    cfg = tmp_path / "cycle.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        prompt: prompts/p.yaml
        agent: openai:{model}
        criteria:
          - id: short
            check: {{type: regex, pattern: "^.{{0,40}}$"}}
        run: {{iterations: 2}}
        providers:
          openai: {{base_url: '{base_url}'}}
    """) + extra)
    return cfg


def _reply(request):
    return Reply(text="Done.", input_tokens=1_000_000, cached_tokens=0, output_tokens=1_000_000)


def _run(cfg: Path, *args: str) -> dict:
    r = CliRunner().invoke(cli, ["run", str(cfg), "--json", "--no-reports", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_second_run_is_served_from_the_cache_and_no_cache_calls_again(tmp_path):
    with LoopbackServer(responder=_reply) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        first = _run(cfg)
        assert srv.request_count == 4  # 2 cases x 2 iterations, not collapsed
        second = _run(cfg)
        assert srv.request_count == 4  # every call answered by the cache
        third = _run(cfg, "--no-cache")
        assert srv.request_count == 8
    assert first["summary"]["usage"]["agent"]["cache_hits"] == 0
    assert second["summary"]["usage"]["agent"]["cache_hits"] == 4
    assert second["summary"]["cost"] == 0 and first["summary"]["cost"] > 0
    assert third["summary"]["usage"]["agent"]["cache_hits"] == 0
    assert (tmp_path / ".cycle" / "cache.db").exists()


def test_cache_can_be_switched_off_in_the_config(tmp_path):
    with LoopbackServer(responder=_reply) as srv:
        cfg = _project(tmp_path, srv.openai_base_url, "cache: {enabled: false}\n")
        _run(cfg)
        _run(cfg)
        assert srv.request_count == 8


def test_console_says_how_many_calls_the_cache_served(tmp_path):
    with LoopbackServer(responder=_reply) as srv:
        cfg = _project(tmp_path, srv.openai_base_url)
        _run(cfg)
        r = CliRunner().invoke(cli, ["run", str(cfg), "--no-reports"])
    assert "4 calls served from the response cache" in r.output


def test_pricing_override_prices_a_model_and_unknown_models_are_estimated(tmp_path):
    with LoopbackServer(responder=_reply) as srv:
        (tmp_path / "known").mkdir()
        known = _project(tmp_path / "known", srv.openai_base_url, textwrap.dedent("""\
            pricing:
              openai:gpt-4o-mini: {input: 1.0, output: 2.0}
            cache: {enabled: false}
        """))
        data = _run(known)
        assert data["summary"]["cost"] == 4 * (1.0 + 2.0)  # 1M in + 1M out per call
        assert data["summary"]["cost_estimated"] is False
        (tmp_path / "odd").mkdir()
        odd = _project(tmp_path / "odd", srv.openai_base_url, "cache: {enabled: false}\n",
                       model="my-local-llama")
        data = _run(odd)
        assert data["summary"]["cost_estimated"] is True
        r = CliRunner().invoke(cli, ["run", str(odd), "--no-reports"])
    # a fallback price is marked wherever it shows
    assert "Cost $50.00 (est.) (agent $50.00 (est.)" in r.output


def test_a_bad_cache_ttl_names_the_file_and_line(tmp_path):
    cfg = _project(tmp_path, "http://127.0.0.1:9", "cache:\n  ttl: soon\n")
    r = CliRunner().invoke(cli, ["run", str(cfg)])
    assert r.exit_code == 2
    assert "cycle.yaml:" in r.output and "ttl" in r.output and "'7d'" in r.output
    assert "Traceback" not in r.output
