"""Approvals and grants over HTTP: ``approval.requested`` on the turn's stream, a POSTed
decision, the tool run once, the audit trail, remembered grants and their revocation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from ostinato.approvals import ApprovalPolicy
from ostinato.models.scripted import ScriptedModel, text_step, tool_step
from ostinato.runtime import Runtime
from ostinato.server import create_app
from ostinato.store.base import Store
from ostinato.tools.registry import ToolRegistry
from tests.server.people import client_for, deploy_tool, eventually, sse_turn, turn_ended

RUNS: list[str] = []


@pytest.fixture
async def deploying(store: Store, model: ScriptedModel) -> AsyncIterator[Runtime]:
    RUNS.clear()
    runtime = Runtime(
        store,
        model=model,
        tools=ToolRegistry([deploy_tool(RUNS)]),
        approvals=ApprovalPolicy(timeout=60),
    )
    yield runtime
    await runtime.close()


@pytest.fixture
def app(deploying: Runtime) -> FastAPI:
    return create_app(deploying, ping_interval=0.2)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(app) as client:
        yield client


async def test_approve_over_http_runs_the_tool_once_and_a_second_decision_is_409(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Deployed."))
    base = f"/v1/conversations/{conversation_id}"
    async with sse_turn(app, conversation_id, {"text": "ship it"}) as stream:
        asked = (await stream.frames_until("approval.requested"))[-1].data
        assert asked["tool"] == "deploy" and asked["input"] == {"target": "prod"}
        assert asked["risk"] == "exec" and asked["family"] == "deploy"
        assert asked["expires_in_s"] == 60
        pending = (await client.get(f"{base}/approvals?pending=true")).json()["approvals"]
        assert [a["id"] for a in pending] == [asked["approval_id"]]
        assert pending[0]["status"] == "pending" and pending[0]["ending"] is None

        url = f"{base}/approvals/{asked['approval_id']}"
        decided = await client.post(url, json={"decision": "approve"})
        assert decided.status_code == 200
        body = decided.json()
        assert body["id"] == asked["approval_id"] and body["tool"] == "deploy"
        assert body["ending"] == "APPROVED" and body["decided_by"] == "user"
        assert body["remember"] == "none" and body["decided_at"] and body["arguments_hash"]
        again = await client.post(url, json={"decision": "decline"})
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"

        rest = await stream.frames_until("turn.finished")
    types = [e.event for e in rest]
    assert "approval.decided" in types and types.index("approval.decided") < types.index(
        "tool.finished"
    )
    assert rest[-1].data["stop_reason"] == "end_turn"
    assert RUNS == ["prod"]
    trail = (await client.get(f"{base}/approvals")).json()["approvals"]
    assert [a["ending"] for a in trail] == ["APPROVED"]
    assert (await client.get(f"{base}/approvals?pending=true")).json()["approvals"] == []


async def test_decline_is_told_to_the_model(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Not deployed."))
    async with sse_turn(app, conversation_id, {"text": "ship it"}) as stream:
        asked = (await stream.frames_until("approval.requested"))[-1].data
        url = f"/v1/conversations/{conversation_id}/approvals/{asked['approval_id']}"
        assert (await client.post(url, json={"decision": "decline"})).json()["ending"] == "DECLINED"
        rest = await stream.frames_until("turn.finished")
    result = next(e.data for e in rest if e.event == "tool.finished")
    assert "declined" in result["result"] and RUNS == []


async def test_unreachable_when_nobody_watches(
    client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("Could not ask."))
    body = (
        await client.post(f"/v1/conversations/{conversation_id}/turns", json={"text": "ship"})
    ).json()  # a JSON request is not a surface that can be asked
    assert body["stop_reason"] == "end_turn" and RUNS == []
    tool_row = next(m for m in body["messages"] if m["role"] == "tool")
    assert "no one was there to ask" in tool_row["blocks"][0]["content"]
    (audit,) = (await client.get(f"/v1/conversations/{conversation_id}/approvals")).json()[
        "approvals"
    ]
    assert audit["ending"] == "UNREACHABLE" and audit["decided_by"] == "nobody"


async def test_cancel_while_waiting_on_approval_declines_it(
    app: FastAPI,
    client: httpx.AsyncClient,
    deploying: Runtime,
    model: ScriptedModel,
    conversation_id: str,
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})))
    base = f"/v1/conversations/{conversation_id}"
    async with sse_turn(app, conversation_id, {"text": "ship it"}) as stream:
        started = await stream.next_frame()
        asked = (await stream.frames_until("approval.requested"))[-1].data
        cancelled = await client.post(f"{base}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json() == {"cancelled_turn": started.data["turn_id"], "dismissed": []}
        finished = (await stream.frames_until("turn.finished"))[-1].data
    assert finished["stop_reason"] == "cancelled" and finished["state"] == "idle"
    (audit,) = (await client.get(f"{base}/approvals")).json()["approvals"]
    assert audit["id"] == asked["approval_id"] and audit["ending"] == "DECLINED"
    assert audit["decided_by"] == "cancelled"
    assert RUNS == []
    assert (await client.post(f"{base}/cancel")).status_code == 409  # nothing left


async def test_grants_are_remembered_listed_and_revoked(
    app: FastAPI,
    client: httpx.AsyncClient,
    deploying: Runtime,
    model: ScriptedModel,
    conversation_id: str,
) -> None:
    model.add(
        tool_step(("deploy", {"target": "prod"})),
        text_step("one"),
        tool_step(("deploy", {"target": "staging"})),
        text_step("two"),
    )
    base = f"/v1/conversations/{conversation_id}"
    async with sse_turn(app, conversation_id, {"text": "ship it"}) as stream:
        asked = (await stream.frames_until("approval.requested"))[-1].data
        decision = {"decision": "approve", "remember": "family", "expires_in_s": 3600}
        body = (await client.post(f"{base}/approvals/{asked['approval_id']}", json=decision)).json()
        assert body["remember"] == "family"
        await stream.frames_until("turn.finished")
    (grant,) = (await client.get(f"{base}/grants")).json()["grants"]
    assert grant["tool"] == "deploy" and grant["scope"] == "family" and grant["key"] == "deploy"
    assert grant["expires_at"] and grant["approval_id"] == asked["approval_id"]

    # The family grant approves another target without asking, even with nobody watching.
    await client.post(f"{base}/turns", json={"text": "staging too"})
    assert RUNS == ["prod", "staging"]
    trail = (await client.get(f"{base}/approvals")).json()["approvals"]
    assert trail[-1]["ending"] == "APPROVED" and trail[-1]["decided_by"] == f"grant {grant['id']}"

    assert (await client.delete(f"{base}/grants/{grant['id']}")).status_code == 204
    assert (await client.get(f"{base}/grants")).json()["grants"] == []
    gone = await client.delete(f"{base}/grants/{grant['id']}")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    await eventually(lambda: turn_ended(deploying.store, conversation_id, 2))


async def test_bad_decisions(
    app: FastAPI, client: httpx.AsyncClient, model: ScriptedModel, conversation_id: str
) -> None:
    model.add(tool_step(("deploy", {"target": "prod"})), text_step("ok"))
    base = f"/v1/conversations/{conversation_id}"
    missing = await client.post(f"{base}/approvals/nope", json={"decision": "approve"})
    assert missing.status_code == 404
    unknown = await client.post("/v1/conversations/nope/approvals/x", json={"decision": "approve"})
    assert unknown.status_code == 404 and "conversation" in unknown.json()["error"]["message"]
    for path in ("approvals", "grants"):
        assert (await client.get(f"/v1/conversations/nope/{path}")).status_code == 404
    assert (await client.delete("/v1/conversations/nope/grants/g")).status_code == 404
    assert (await client.post("/v1/conversations/nope/cancel")).status_code == 404
    async with sse_turn(app, conversation_id, {"text": "ship it"}) as stream:
        asked = (await stream.frames_until("approval.requested"))[-1].data
        url = f"{base}/approvals/{asked['approval_id']}"
        for body, expected in (
            ({}, "decision is required"),
            ({"decision": "maybe"}, "decision"),
            ({"decision": "approve", "remember": "always"}, "remember"),
            ({"decision": "decline", "remember": "exact"}, "remember goes with decision"),
            ({"decision": "approve", "remember": "exact", "expires_in_s": 0}, "expires_in_s"),
            ({"decision": "approve", "expires_in_s": 10}, "expires_in_s goes with remember"),
            ({"decision": "approve", "who": "me"}, "who is not a known field"),
        ):
            response = await client.post(url, json=body)
            assert response.status_code == 422, body
            assert expected in response.json()["error"]["message"], (body, response.json())
        assert (await client.post(url, json={"decision": "approve"})).status_code == 200
        await stream.frames_until("turn.finished")


async def test_the_workdir_tools_write_once_approved(
    store: Store, model: ScriptedModel, tmp_path: Path
) -> None:
    runtime = Runtime(store, model=model, data_dir=tmp_path)
    app = create_app(runtime)
    model.add(
        tool_step(("write_file", {"path": "notes/todo.txt", "content": "milk\n"})),
        text_step("Written."),
    )
    async with client_for(app) as client:
        cid = (await client.post("/v1/conversations")).json()["id"]
        async with sse_turn(app, cid, {"text": "note milk"}) as stream:
            asked = (await stream.frames_until("approval.requested"))[-1].data
            assert asked["tool"] == "write_file" and asked["risk"] == "write"
            assert asked["family"] is None
            url = f"/v1/conversations/{cid}/approvals/{asked['approval_id']}"
            family = await client.post(url, json={"decision": "approve", "remember": "family"})
            assert family.status_code == 422 and "no family" in family.json()["error"]["message"]
            assert (await client.post(url, json={"decision": "approve"})).status_code == 200
            await stream.frames_until("turn.finished")
    assert (tmp_path / "workdirs" / cid / "notes" / "todo.txt").read_text() == "milk\n"
    await runtime.close()
