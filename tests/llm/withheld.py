"""A judge's call whose answer the provider withheld, for every provider's hostile tests."""

from __future__ import annotations

from typing import Any

import pytest

from cycle.errors import MalformedResponseError
from cycle.records import Message

SCORE = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


async def judge_withheld(model: Any, server: Any, reply: Any, says: str) -> None:
    """The structured call (a judge's) answered by ``reply``, withheld: the error names
    why (``says``), not "does not follow the schema", and no repair is asked for."""
    server.enqueue(reply)
    with pytest.raises(MalformedResponseError, match=says):
        await model.generate_structured([Message.user("hi")], SCORE)
    assert server.request_count == 1


async def answer_withheld(make_model: Any, name: str, server: Any, recorder: Any, reply: Any,
                          says: str) -> None:
    """A call answered by ``reply``, withheld: an error naming why (``says``), not asked
    again, and charged what the provider reported (to the cap and to the failed call)."""
    from cycle.llm.budget import Budget

    budget = Budget(1.0)
    model = make_model(name, budget=budget, bus=recorder.bus)
    server.enqueue(reply)
    with pytest.raises(MalformedResponseError) as e:
        await model.generate([Message.user("hi")])
    assert f"{name}: no answer, {says}" in str(e.value)
    assert server.request_count == 1  # the same call would be withheld again
    assert budget.spent > 0 and budget.reserved == 0
    assert recorder.calls[-1].error and recorder.calls[-1].cost == pytest.approx(budget.spent)


def run_withheld(tmp_path: Any, monkeypatch: Any, provider: str, key: str,
                 responder: Any, *, resume: bool = False) -> tuple[Any, list[Any]]:
    """``cycle run -n 1`` of a ``cycle init --provider PROVIDER`` project (its key in .env)
    against the loopback server answering with ``responder``: the CLI's result, and the
    requests the server saw. With ``resume``, then ``cycle run --resume @last`` against
    the same server: the two results and the store's cost after the first (``stored_cost``),
    and the requests of both."""
    from click.testing import CliRunner

    from cycle.cli import cli
    from cycle.testing import LoopbackServer

    r = CliRunner().invoke(cli, ["init", str(tmp_path), "--provider", provider])
    assert r.exit_code == 0, r.output
    (tmp_path / ".env").write_text(f"{key}\n")
    monkeypatch.chdir(tmp_path)
    with LoopbackServer(responder=responder) as srv:
        cfg = tmp_path / "cycle.yaml"
        url = getattr(srv, f"{provider}_base_url")
        cfg.write_text(cfg.read_text() + f"providers:\n  {provider}: {{base_url: '{url}'}}\n")
        first = CliRunner().invoke(cli, ["run", "-n", "1"])
        if not resume:
            return first, list(srv.requests)
        paid = stored_cost(tmp_path)
        again = CliRunner().invoke(cli, ["run", "--resume", "@last"])
        return (first, again, paid), list(srv.requests)


def stored_cost(project: Any) -> float:
    """The dollars a project's store says its calls cost (cache hits are free)."""
    import sqlite3

    with sqlite3.connect(project / ".cycle" / "cycle.db") as db:
        return db.execute("SELECT coalesce(sum(cost), 0) FROM calls WHERE "
                          "coalesce(cache_hit, 0) = 0").fetchone()[0]


def replayed_not_paid_again(tmp_path: Any, runs: Any, requests: list[Any], says: str) -> None:
    """What a resume of a run whose three agent answers were all withheld must show: the
    same three errors again, no request sent again, and the refusals charged once."""
    import pytest

    first, again, paid = runs
    assert "0 passed, 0 failed, 3 errored" in first.output, first.output
    assert len(requests) == 3  # none sent again by the resume
    assert "0 passed, 0 failed, 3 errored" in again.output, again.output
    assert again.output.count(says) == 3, again.output
    assert again.exit_code == first.exit_code
    assert paid > 0 and stored_cost(tmp_path) == pytest.approx(paid)  # charged once
