"""The HTML cycle report: one file with nothing to fetch, opened in a real headless
browser (Debian's chromium, driven by Playwright) where its charts must draw and
nothing may fail."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from cycle.cli import cli
from cycle.report.html import heatmap, word_diff

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def improve(example: str, tmp_path: Path, *args: str, edit=None) -> tuple[Path, dict]:
    src = ROOT / "examples" / example
    for name in ("cases", "prompts", "cycle.yaml"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy)(src / name, tmp_path / name)
    if edit:
        cfg = tmp_path / "cycle.yaml"
        cfg.write_text(edit(cfg.read_text()))
    r = CliRunner().invoke(cli, ["improve", str(tmp_path / "cycle.yaml"), "--headless", "--yes",
                                 "--store", str(tmp_path / "s.db"), *args])
    assert r.exit_code == 0, r.output
    html = next((tmp_path / "reports").glob("*.html"))
    return html, json.loads(html.with_suffix(".json").read_text())


def test_report_is_one_file_with_nothing_to_fetch(tmp_path):
    html, data = improve("agent-tools", tmp_path)
    text = html.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org", "")
    assert not re.search(r'(src|href)="(?!#)', text)  # no image, stylesheet or link to load
    assert "Offline model:" in text  # offline results say so here too
    assert data["cases"] and set(data["transcripts"]) == set(data["cases"])
    assert "order-support" in text and "lookup_order" in text  # transcripts are in the page


def test_heatmap_and_word_diff_show_what_changed():
    rounds = [{"round": 0}, {"round": 1}]
    table = str(heatmap({"b": {0: 20.0, 1: None}, "a": {"0": 90.0}}, rounds))
    assert table.index(">a<") < table.index(">b<")  # cases in order
    assert 'title="b, round 1: every iteration errored"' in table and ">err<" in table
    assert 'title="not evaluated"' in table  # a has no round 1
    diff = str(word_diff("Be polite. Answer <briefly>.", "Be polite. Answer in full."))
    assert "<del>&lt;briefly&gt;.</del>" in diff and "<ins>in full.</ins>" in diff


def _browser_ready() -> None:
    """Skip where no browser can run, except in CI (.ci/run installs chromium and says so)."""
    if CHROMIUM is None or not _has_playwright():
        missing = "chromium (apt-get install chromium)" if CHROMIUM is None else "playwright"
        if os.environ.get("CYCLE_REQUIRE_BROWSER"):
            pytest.fail(f"CYCLE_REQUIRE_BROWSER is set but {missing} is not installed")
        pytest.skip(f"no {missing} on this machine; .ci/run installs it")


def _has_playwright() -> bool:
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return True


def open_in_browser(html: Path, shot: Path) -> dict:
    """Load the page in headless chromium; return what a person would see and what failed."""
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on("request", lambda r: requested.append(r.url))
            page.goto(html.as_uri())
            seen = {
                "score_chart": page.locator("#score-chart").bounding_box(),
                "points": page.locator("#score-chart circle").count(),
                "cells": page.locator("#heatmap td.cell").count(),
                "cost_bars": page.locator("#cost-chart rect").count(),
                "cost_chart": page.locator("#cost-chart").bounding_box(),
                "suggestions": page.locator(".suggestion").count(),
                "title": page.title(),
            }
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    seen["problems"] = problems
    seen["requested"] = requested
    return seen


def test_charts_render_in_a_real_browser_without_errors(tmp_path):
    _browser_ready()
    html, data = improve("agent-tools", tmp_path)
    seen = open_in_browser(html, tmp_path / "report.png")
    assert seen["problems"] == [] and seen["requested"] == [html.as_uri()]
    assert seen["title"] == f"Cycle {data['cycle_id']}: order-support"
    box = seen["score_chart"]
    assert box and box["width"] > 300 and box["height"] > 100  # drawn, at a readable size
    assert seen["points"] == len(data["rounds"])
    assert seen["cells"] == len(data["cases"]) * len(data["rounds"])
    assert seen["suggestions"] == sum(len(r["suggestions"]) for r in data["rounds"])
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_cost_chart_draws_each_role_of_each_round(tmp_path):
    """A priced run through the real openai SDK: the cost chart has a bar per role and round."""
    _browser_ready()
    from cycle.testing import LoopbackServer

    with LoopbackServer() as srv:
        def priced(text: str) -> str:
            return text.replace("offline:default", "openai:m") + (
                f"providers:\n  openai: {{base_url: '{srv.openai_base_url}'}}\n"
                "pricing:\n  openai:m: {input: 1.0, output: 2.0}\n")
        html, data = improve("quickstart", tmp_path, "-n", "1", edit=priced)
    spent = [(r["round"], role) for r in data["rounds"] for role, usd in r["cost_by_role"].items() if usd > 0]
    assert spent
    seen = open_in_browser(html, tmp_path / "report.png")
    assert seen["problems"] == []
    assert seen["cost_bars"] == len(spent)
    assert seen["cost_chart"] and seen["cost_chart"]["height"] > 100
    assert "Offline model:" not in html.read_text()


def test_a_runs_html_report_shows_every_case_in_a_real_browser(tmp_path, monkeypatch):
    """`cycle run` writes an HTML report beside the others: per case the output, each
    criterion's score and reasoning, the conversation where there is one."""
    _browser_ready()
    src = ROOT / "examples" / "conversation"
    for name in ("cases", "prompts", "cycle.yaml"):
        (shutil.copytree if (src / name).is_dir() else shutil.copy)(src / name, tmp_path / name)
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "cycle.yaml"), "-n", "1",
                                 "--store", str(tmp_path / "s.db")])
    assert r.exit_code in (0, 1), r.output
    (html,) = (tmp_path / "reports").glob("run-*.html")
    assert "html report" in r.output
    data = json.loads(html.with_suffix(".json").read_text())
    text = html.read_text()
    assert "<script" not in text and not re.search(r'(src|href)="(?!#)', text)
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(html.as_uri())
            cases = page.locator("details.case").count()
            bars = page.locator("#score-histogram rect").count()
            box = page.locator("#score-histogram").bounding_box()
            reasoning = page.locator("table.verdicts td").all_inner_texts()
            transcripts = page.locator("pre.transcript").count()
        finally:
            browser.close()
    assert problems == []
    assert cases == len(data["cases"]) and bars == 10 and box and box["height"] > 100
    first = data["cases"][0]["results"][0]["verdicts"][0]["reasoning"]
    assert first in reasoning  # the judge's reasoning, per criterion
    assert transcripts >= 1  # a conversation shows as its transcript


def test_a_plain_prompt_cycle_report_shows_first_and_final_outputs_side_by_side(tmp_path):
    html, data = improve("quickstart", tmp_path, "-n", "1")
    assert data["final"]["version"] != data["initial"]["version"]  # the cycle moved head
    assert set(data["outputs"]) == set(data["cases"])  # every case only answered
    first = next(iter(data["outputs"].values()))
    assert first["first"] != first["final"]  # the answer itself changed
    text = html.read_text()
    assert 'id="outputs"' in text and f"<th>{data['final']['version']}</th>" in text


def test_a_hostile_answer_and_error_are_shown_as_text_in_a_real_browser(tmp_path, monkeypatch):
    """A model's answer and a provider's error holding a script, an <img onerror>, an
    <svg onload>, template syntax, ESC and a right-to-left override: in the run's HTML
    report no script runs, nothing is fetched, and every character is shown as text (the
    override as \\u202e: it reversed the report's own words after it)."""
    _browser_ready()
    import textwrap

    from playwright.sync_api import sync_playwright

    from cycle.testing import Fault, LoopbackServer, Reply

    hostile = ('</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
               '"><svg onload="window.pwned=3"> {{ 7*7 }} \x1b[2J \u202eseulav')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.chdir(tmp_path)
    with LoopbackServer() as srv:
        (tmp_path / "p.yaml").write_text(textwrap.dedent("""\
            id: p
            system: You answer.
            user_template: "{{ q }}"
            params: {model: openai:gpt-4o-mini}
        """))
        (tmp_path / "cases.yaml").write_text("- id: a\n  input: {q: q1}\n- id: b\n  input: {q: q2}\n")
        (tmp_path / "cycle.yaml").write_text(
            "prompt: p.yaml\ncriteria: [{id: short, check: {type: regex, pattern: '^.{0,40}$'}}]\n"
            f"cases: [cases.yaml]\nrun: {{iterations: 1}}\n"
            f"providers: {{openai: {{base_url: '{srv.openai_base_url}'}}}}\n")
        srv.enqueue(*[Fault.status(400, message=hostile)] * 2)
        srv.responder = lambda request: Reply(text=hostile)
        r = CliRunner().invoke(cli, ["run", "cycle.yaml", "--store", str(tmp_path / "s.db")])
    assert r.exit_code == 3, r.output
    (html,) = (tmp_path / "reports").glob("run-*.html")
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.on("request", lambda req: requested.append(req.url))
            page.goto(html.as_uri())
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            pwned = page.evaluate("window.pwned")
            made = page.locator("script, img, svg[onload]").count()
            shown = page.inner_text("body")
        finally:
            browser.close()
    assert pwned is None and made == 0 and requested == [html.as_uri()]
    assert shown.count("</script><script>window.pwned=1</script>") == 2  # answer and error
    assert "{{ 7*7 }}" in shown and "\\x1b[2J" in shown and "\\u202eseulav" in shown
    assert "\u202e" not in shown and "\x1b" not in shown
