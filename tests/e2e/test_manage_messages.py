"""manage_messages through ``ostinato serve`` (the offline model calls the tool a
``/tool NAME {json}`` message names), on SQLite and PostgreSQL: stats runs without a
card; hide and compact show an approval card first; the rows stay in ``/messages``,
marked in their metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.hostile import serving
from tests.e2e.test_consent import last_result, tool, turn


def approve(card: dict[str, Any]) -> dict[str, Any]:
    return {"decision": "approve"}


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_stats_hide_and_compact_through_the_server(engine: str, tmp_path: Path) -> None:
    with serving(engine, tmp_path) as server:
        cid = server.post("/v1/conversations").json()["id"]
        for line in ("alpha apples", "beta bananas", "gamma grapes"):
            assert turn(server, cid, line) == []

        assert turn(server, cid, tool("manage_messages", {"action": "stats"})) == []
        stats = json.loads(last_result(server, cid))
        starts = [t["starts"] for t in stats["earlier_turns"]]
        assert starts == ["alpha apples", "beta bananas", "gamma grapes"]
        first = stats["earlier_turns"][0]

        hide = {"action": "hide", "from_seq": first["from_seq"], "through_seq": first["from_seq"]}
        (card,) = turn(server, cid, tool("manage_messages", hide), approve)
        assert (card["tool"], card["risk"]) == ("manage_messages", "write")
        assert json.loads(last_result(server, cid))["hidden_from_model"]["rows"] >= 2

        beta = stats["earlier_turns"][1]
        compact = {"action": "compact", "through_seq": beta["through_seq"]}
        (card,) = turn(server, cid, tool("manage_messages", compact), approve)
        done = json.loads(last_result(server, cid))
        assert done["compacted"]["through_seq"] == beta["through_seq"], done

        rows = server.get(f"/v1/conversations/{cid}/messages?include_hidden=true").json()
        by_text = {r["blocks"][0].get("text"): r for r in rows["messages"] if r["blocks"]}
        assert by_text["alpha apples"]["metadata"].get("left_out") is True
        assert by_text["beta bananas"]["metadata"].get("folded") == beta["through_seq"]
        assert "folded" not in by_text["gamma grapes"]["metadata"]
        summaries = [r for r in rows["messages"] if r["metadata"].get("kind") == "summary"]
        assert len(summaries) == 1 and summaries[0]["hidden"] is True
