"""Every route of the application, walked from its own route table with two callers: a
route that names one of ann's things answers bob exactly as it answers for a thing that
does not exist (404, the same body); a route that lists shows bob nothing of ann's; no
route but the public ones answers a caller without credentials.

A route added later without the ownership check fails here. A route added with a path
parameter or a body this test does not know fails too, until it is taught here how to
name one of ann's things or what to send.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, WebSocketRoute

from ostinato.approvals import Approval, Grant, arguments_hash
from ostinato.ids import new_id
from ostinato.messages import user_text
from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.server.agent_protocol.record import RunRecord
from ostinato.server.auth.middleware import is_public
from ostinato.server.responses.record import ResponseRecord
from ostinato.server.responses.wire import Envelope
from ostinato.store.base import (
    CreateApproval,
    CreateGrant,
    Enqueue,
    QueuedInput,
    StartTurn,
    Store,
    Turn,
    utcnow,
)
from ostinato.store.jobs import ClaimJob, FinishJob, JobRun
from ostinato.store.protocol_records import ProtocolRecords
from ostinato.tools.personal_mcp import CredentialBox, PersonalMcp
from tests.server.conftest import Callers
from tests.server.sse_client import open_stream
from tests.server.ws_client import Refused, open_websocket

AP_RUN = {"assistant_id": "ostinato", "input": {"messages": [{"role": "user", "content": "hi"}]}}
# A valid body for each route that takes one, so a refusal is about ownership only.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/conversations"): {"title": "bob's"},
    ("PATCH", "/v1/conversations/{conversation_id}"): {"title": "taken"},
    ("PATCH", "/v1/conversations/{conversation_id}/agents"): {"versions": {"a": "latest"}},
    ("POST", "/v1/admin/reload"): None,
    ("POST", "/v1/import"): [],  # a ChatGPT file of no conversations: bob's own, empty
    ("POST", "/v1/conversations/{conversation_id}/turns"): {"text": "hello"},
    ("POST", "/v1/conversations/{conversation_id}/cancel"): None,
    ("POST", "/v1/conversations/{conversation_id}/messages/{seq}/edit"): {"text": "mine"},
    ("POST", "/v1/conversations/{conversation_id}/messages/{seq}/regenerate"): {},
    ("PUT", "/v1/conversations/{conversation_id}/branch"): {"leaf": 1},
    ("POST", "/v1/conversations/{conversation_id}/approvals/{approval_id}"): {
        "decision": "approve"
    },
    ("DELETE", "/v1/conversations/{conversation_id}/grants/{grant_id}"): None,
    ("POST", "/v1/memories"): {"fact": "bob likes tea"},
    ("DELETE", "/v1/memories/{memory_id}"): None,
    ("POST", "/v1/memories/{memory_id}/relations"): {"relation": "about", "target": "x"},
    ("POST", "/v1/memories/{memory_id}/resolve"): None,
    ("PUT", "/v1/tools/{name}"): {"enabled": False},
    ("POST", "/v1/schedules"): {"when": "in 1 hour", "text": "x"},  # + the caller's conversation
    ("POST", "/v1/conversations/{conversation_id}/triggers"): {"text": "build failed"},
    ("POST", "/v1/tools/forged"): {
        "name": "bobs",
        "description": "Bob's tool.",
        "parameters": {"type": "object"},
        "code": "() => 'bob'",
    },
    ("POST", "/v1/mcp-servers"): {"name": "bobs", "url": "http://127.0.0.1:9/mcp"},
    ("POST", "/v1/chat/completions"): {
        "model": "ostinato",
        "messages": [{"role": "user", "content": "hello"}],
    },
    ("POST", "/v1/responses"): {"model": "ostinato", "input": "hello"},
    ("POST", "/openai/v1/responses"): {"model": "ostinato", "input": "hello"},
    ("POST", "/v1/responses/{response_id}/cancel"): None,
    ("POST", "/openai/v1/responses/{response_id}/cancel"): None,
    ("POST", "/openai/v1/conversations"): {"metadata": {"who": "bob"}},
    ("POST", "/openai/v1/conversations/{conversation_id}"): {"metadata": {"who": "bob"}},
    ("POST", "/langgraph/assistants/search"): {},
    ("PUT", "/langgraph/store/items"): {"namespace": ["bob"], "key": "k", "value": {"a": 1}},
    ("DELETE", "/langgraph/store/items"): {"namespace": ["bob"], "key": "k"},
    ("POST", "/langgraph/store/items/search"): {"namespace_prefix": []},
    ("POST", "/langgraph/store/namespaces"): {},
    ("POST", "/langgraph/threads"): {"metadata": {"who": "bob"}},
    ("POST", "/langgraph/threads/search"): {},
    ("PATCH", "/langgraph/threads/{thread_id}"): {"metadata": {"who": "bob"}},
    ("POST", "/langgraph/threads/{thread_id}/history"): {},
    ("POST", "/langgraph/threads/{thread_id}/copy"): None,
    ("POST", "/langgraph/threads/{thread_id}/state"): {"values": {}},
    ("POST", "/langgraph/threads/{thread_id}/runs"): AP_RUN,
    ("POST", "/langgraph/threads/{thread_id}/runs/stream"): AP_RUN,
    ("POST", "/langgraph/threads/{thread_id}/runs/wait"): AP_RUN,
    ("POST", "/langgraph/threads/{thread_id}/runs/{run_id}/cancel"): None,
    ("POST", "/langgraph/threads/{thread_id}/runs/crons"): {**AP_RUN, "schedule": "0 9 * * *"},
    ("POST", "/langgraph/runs/crons"): {**AP_RUN, "schedule": "0 9 * * *"},
    ("PATCH", "/langgraph/runs/crons/{cron_id}"): {"enabled": False},
    ("POST", "/langgraph/runs/crons/search"): {},
    ("POST", "/langgraph/runs/crons/count"): {},
    # stateless runs: each in a new thread of bob's own
    ("POST", "/langgraph/runs"): AP_RUN,
    ("POST", "/langgraph/runs/stream"): AP_RUN,
    ("POST", "/langgraph/runs/wait"): AP_RUN,
    ("PATCH", "/v1/conversations/{conversation_id}/queue/{queued_id}"): {"text": "Bob's"},
    ("POST", "/v1/ai-sdk/chat"): {
        "id": "bobs-chat",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    },
    # A2A (issue 31): JSON-RPC; the tasks a request names are checked in tests/server/a2a
    ("POST", "/a2a"): {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
    ("POST", "/a2a/{agent}"): {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
    # AG-UI (issue 31): a run in a thread of bob's own (ann's thread: tests/server/ag_ui)
    ("POST", "/v1/ag-ui"): {
        "threadId": "bobs-thread",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
    },
    # MCP (issue 31): the agents' listing (calls naming ann's things: tests/server/mcp_server)
    ("POST", "/mcp"): {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ("POST", "/v1/ag-ui/{agent}"): {
        "threadId": "bobs-thread-2",
        "runId": "r2",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
    },
}
UNOWNED = ("name", "agent", "assistant_id")  # name no one's thing (a tool, an agent)
# The query of each route that needs one: a search for ann's words finds none of them.
QUERIES: dict[tuple[str, str], str] = {("GET", "/v1/search"): "?q=ann%27s secret"}
FORGED = "/v1/tools/forged/"  # its {name} is one of ann's forged tools
MCP = "/v1/mcp-servers/"  # its {name} is one of ann's MCP servers
LANGGRAPH = "/langgraph/"
ITEM = ("GET", "/langgraph/store/items")  # an Agent Protocol store item, named by its query
REFUSED = {("POST", "/langgraph/runs/crons"): 422}  # refused for everyone (a stateless cron)


async def _anns_things(callers: Callers) -> dict[str, str]:
    """One of each of ann's things, by the path parameter that names it."""
    ann = callers.ann
    runtime = callers.app.state.ostinato.runtime
    if runtime.personal_mcp is None:  # people's MCP servers on; loopback: nothing listens
        runtime.personal_mcp = PersonalMcp(
            runtime.store, None, CredentialBox(None), allow_private=True
        )
    server = f"anns_{uuid.uuid4().hex[:10]}"  # one PostgreSQL database serves every test
    added = await ann.post("/v1/mcp-servers", json={"name": server, "url": "http://127.0.0.1:9/m"})
    assert added.status_code == 201, added.text
    cid = (await ann.post("/v1/conversations", json={"title": "ann's"})).json()["id"]
    memory = (await ann.post("/v1/memories", json={"fact": "Ann's secret"})).json()["id"]
    asked = {"conversation_id": cid, "when": "in 1 hour", "text": "Ann's secret plan"}
    schedule = (await ann.post("/v1/schedules", json=asked)).json()["id"]
    store = callers.app.state.ostinato.runtime.store
    approval = Approval(
        new_id(),
        cid,
        new_id(),
        "tu_1",
        "shell",
        {},
        arguments_hash("shell", {}),
        "exec",
        None,
        utcnow(),
    )
    grant = Grant(new_id(), "ann", cid, "shell", "exact", "k", utcnow(), approval_id=approval.id)
    turn = Turn(new_id(), cid, new_id(), "running", utcnow())
    waiting = QueuedInput(new_id(), cid, user_text("Ann's secret, queued"), utcnow())
    await store.write(
        CreateApproval(approval), CreateGrant(grant), StartTurn(turn), Enqueue(waiting)
    )
    job, now = f"test_{new_id()}", utcnow()  # a job of its own: one database serves all
    (claimed,) = await store.write(ClaimJob("ann", job, "h1", now, now, now))
    run = JobRun(new_id(), "ann", job, now, now, "ok", [{"action": "lapsed", "text": "x"}])
    await store.write(FinishJob(claimed, "h1", run))
    response = await _anns_response(store, cid)
    cron = {**BODIES[("POST", "/langgraph/runs/crons")], "input": {"messages": ["Ann's secret"]}}
    made = await ann.post(f"/langgraph/threads/{cid}/runs/crons", json=cron)
    assert made.status_code == 200, made.text
    run = RunRecord(new_id(), "ann", cid, "ostinato", 0, new_id())
    assert isinstance(store, ProtocolRecords)
    await store.put_record(run.to_record(), create=True)
    return {
        "response_id": response,
        "thread_id": cid,
        "lg_run": run.id,
        "assistant_id": "ostinato",
        "conversation_id": cid,
        "turn_id": turn.id,
        "approval_id": approval.id,
        "grant_id": grant.id,
        "memory_id": memory,
        "schedule_id": schedule,
        "cron_id": made.json()["cron_id"],
        "queued_id": waiting.id,
        "run_id": run.id,
        "agent": "default",
        "name": "clock",
        "forged": "anns",
        "mcp": server,
        "seq": "1",  # a row of ann's conversation (its tree is hers)
        "owner": "ann",  # an admin's route erases her
    }


async def _anns_response(store: Store, cid: str) -> str:
    """One of ann's responses (the Responses API), as its route stores one."""
    envelope = Envelope(f"resp_{new_id()}", "ostinato", 0, cid)
    record = ResponseRecord(envelope.id, "ann", cid, 0, envelope)
    assert isinstance(store, ProtocolRecords)
    await store.put_record(record.to_record(), create=True)
    return envelope.id


def _fill(path: str, things: dict[str, str]) -> str:
    if path.startswith(LANGGRAPH):  # its {run_id} is one of ann's Agent Protocol runs
        path = path.replace("{run_id}", things["lg_run"])
    if path.startswith(FORGED):
        path = path.replace("{name}", things["forged"])
    if path.startswith(MCP):
        path = path.replace("{name}", things["mcp"])
    for name in _params(path):
        assert name in things, f"teach this test how to name one of ann's {name!r}"
        path = path.replace("{" + name + "}", things[name])
    return path


def _params(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def _routes(routes: list[BaseRoute]) -> list[tuple[str, str]]:
    """(method, path) of every route, WebSockets as ``WS``, through included routers
    (FastAPI keeps them as routers of their own; none is included with a prefix)."""
    found: list[tuple[str, str]] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found.extend(_routes(included.routes))
        elif isinstance(route, APIRoute):
            found.extend((method, route.path) for method in sorted(route.methods))
        elif isinstance(route, WebSocketRoute):
            found.append(("WS", route.path))
    return [(m, p) for m, p in found if not is_public(p) and m != "HEAD"]


async def _ask(
    callers: Callers, who: httpx.AsyncClient, method: str, template: str, path: str
) -> tuple[int, Any]:
    """The status and JSON body ``who`` gets for ``method path``."""
    headers = {k: v for k, v in who.headers.items() if k == "authorization"}
    if method == "WS":
        try:
            async with open_websocket(callers.app, path, headers=headers):
                return 101, None
        except Refused as refused:
            return refused.status or 0, refused.body
    if template.endswith("/events"):  # a stream that opens never ends by itself
        async with open_stream(callers.app, method, path, headers=headers) as stream:
            if stream.status == 200:
                return 200, None
    if method in ("POST", "PUT", "PATCH") and (method, template) not in BODIES:
        pytest.fail(f"teach this test a valid body for {method} {template}")
    body = BODIES.get((method, template))
    if (method, template) == ("POST", "/v1/schedules"):  # in a conversation of the caller's
        own = await who.post("/v1/conversations")
        body = {**body, "conversation_id": own.json().get("id", "none")}
    query = QUERIES.get((method, template), "")
    response = await who.request(method, path + query, json=body, headers={"a2a-version": "1.0"})
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.status_code, response.text  # a stream that ends by itself
    return response.status_code, response.json() if response.content else None


async def test_every_route_keeps_anns_things_from_bob(
    callers: Callers, model: ScriptedModel
) -> None:
    # bob's own new conversations: a completion, the AI SDK, two responses
    model.add(*(text_step(f"hello bob {n}") for n in range(4)))
    model.add(text_step("ag-ui bob"), text_step("ag-ui bob again"))  # and AG-UI threads
    things = await _anns_things(callers)
    missing = {
        name: new_id() for name in things if name not in ("name", "forged", "mcp", "seq", "owner")
    } | {
        "agent": "default",
        "assistant_id": "ostinato",
        "name": "clock",
        "forged": "nobodys",
        "mcp": "unknown_server",
        "seq": "1",
        "owner": "nobody",
    }
    routes = _routes(callers.app.routes)
    assert len(routes) >= 15
    for method, template in routes:
        if (method, template) == ITEM:  # named by its query: its own test below
            continue
        named = [
            p for p in _params(template) if p not in UNOWNED or template.startswith((FORGED, MCP))
        ]
        path = _fill(template, things)
        status, body = await _ask(callers, callers.bob, method, template, path)
        if template.startswith("/v1/admin/"):  # an operator's: bob is none
            assert status == 403, (method, template, status, body)
            continue
        if (method, template) in REFUSED:
            assert status == REFUSED[(method, template)], (method, template, status, body)
            continue
        if not named:  # bob's own listing or creation: nothing of ann's in it
            assert status < 400, (method, template, status, body)
            shared = ("clock", "default", "ostinato", "1", "ann")  # not ann's alone
            assert not any(v in str(body) for v in things.values() if v not in shared)
            assert "Ann's secret" not in str(body)
            continue
        gone_status, gone_body = await _ask(
            callers, callers.bob, method, template, _fill(template, missing)
        )
        assert status == gone_status == 404, (method, template, status, body)
        expected = str(gone_body)
        for name, value in missing.items():
            expected = expected.replace(value, things[name])
        assert str(body) == expected, (method, template)


async def test_a_completion_naming_anns_conversation_answers_bob_as_a_missing_one(
    callers: Callers,
) -> None:
    things = await _anns_things(callers)
    body = BODIES[("POST", "/v1/chat/completions")]
    answers = []
    for cid in (things["conversation_id"], new_id()):
        for way in (
            {"headers": {"x-ostinato-conversation-id": cid}},
            {"extra": {"conversation_id": cid}},
        ):
            response = await callers.bob.post(
                "/v1/chat/completions",
                json={**body, **way.get("extra", {})},
                headers=way.get("headers"),
            )
            assert response.status_code == 404
            answers.append(response.json()["error"]["message"].replace(cid, "ID"))
    assert len(set(answers)) == 1
    chat = BODIES[("POST", "/v1/ai-sdk/chat")] | {"id": things["conversation_id"]}
    refused = await callers.bob.post("/v1/ai-sdk/chat", json=chat)
    assert refused.status_code == 404
    assert (
        refused.json()["error"]["message"]
        == f"no conversation with id {things['conversation_id']!r}"
    )


async def test_every_route_but_the_public_ones_needs_credentials(callers: Callers) -> None:
    things = await _anns_things(callers)
    for method, template in _routes(callers.app.routes):
        path = _fill(template, things)
        status, body = await _ask(callers, callers.nobody, method, template, path)
        assert status == 401, (method, template, status)
        assert body["error"]["code"] == "unauthorized"


async def test_an_agent_protocol_store_item_is_its_owners_alone(callers: Callers) -> None:
    item = {"namespace": ["notes"], "key": "k", "value": {"secret": "Ann's secret"}}
    assert (await callers.ann.put("/langgraph/store/items", json=item)).status_code == 204
    asked = {"namespace": "notes", "key": "k"}
    assert (await callers.ann.get("/langgraph/store/items", params=asked)).status_code == 200
    theirs = await callers.bob.get("/langgraph/store/items", params=asked)
    missing = await callers.bob.get("/langgraph/store/items", params={**asked, "key": "none"})
    assert theirs.status_code == missing.status_code == 404
    found = await callers.bob.post("/langgraph/store/items/search", json={"namespace_prefix": []})
    spaces = await callers.bob.post("/langgraph/store/namespaces", json={})
    assert found.json() == {"items": []} and spaces.json() == {"namespaces": []}
