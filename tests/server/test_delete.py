"""``DELETE /v1/conversations/{id}``: everything of the conversation goes, its workdir
too; a running one is refused; another owner's answers like a missing one."""

from __future__ import annotations

from pathlib import Path

import httpx

from ostinato.models.scripted import ScriptedModel, text_step
from ostinato.runtime import Runtime
from ostinato.store.base import SetConversationState
from ostinato.tools.workdir import workdir_for
from tests.server.conftest import Callers


async def test_a_deleted_conversation_is_gone_with_its_workdir(
    client: httpx.AsyncClient, model: ScriptedModel, runtime: Runtime, tmp_path: Path
) -> None:
    runtime.data_dir = tmp_path
    cid = (await client.post("/v1/conversations", json={"title": "Doomed"})).json()["id"]
    model.add(text_step("noted"))
    said = await client.post(f"/v1/conversations/{cid}/turns", json={"text": "remember tapir"})
    assert said.status_code in (200, 201, 202)
    await runtime.settle(5)
    folder = workdir_for(tmp_path, cid)
    (folder / "notes.txt").write_text("tapir")
    assert (await client.get("/v1/search", params={"q": "tapir"})).json()["hits"]
    deleted = await client.delete(f"/v1/conversations/{cid}")
    assert deleted.status_code == 204
    assert (await client.get(f"/v1/conversations/{cid}")).status_code == 404
    assert (await client.get(f"/v1/conversations/{cid}/messages")).status_code == 404
    assert (await client.get("/v1/search", params={"q": "tapir"})).json()["hits"] == []
    assert not folder.exists()
    again = await client.delete(f"/v1/conversations/{cid}")
    assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"


async def test_a_running_conversation_is_not_deleted(
    client: httpx.AsyncClient, runtime: Runtime, conversation_id: str
) -> None:
    await runtime.store.write(SetConversationState(conversation_id, "running"))
    refused = await client.delete(f"/v1/conversations/{conversation_id}")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conversation_busy"
    assert (await client.get(f"/v1/conversations/{conversation_id}")).status_code == 200


async def test_another_owners_conversation_is_not_theirs_to_delete(callers: Callers) -> None:
    cid = (await callers.ann.post("/v1/conversations")).json()["id"]
    refused = await callers.bob.delete(f"/v1/conversations/{cid}")
    assert refused.status_code == 404
    assert (await callers.ann.get(f"/v1/conversations/{cid}")).status_code == 200
