"""The official ``openai`` Python SDK against a real ``ostinato serve`` in auth mode
``keys``: ``base_url`` and an API key, a three-message conversation held through one
conversation id (streamed and not), a tool turn's answer, an approval answered with
"yes", and the stored rows never duplicated although the SDK resends the history; a
resent history that edits a message branches the conversation there."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import openai
import pytest

from ostinato.identity.keys import create_key
from ostinato.store import open_store
from tests.e2e.server import Server

HEADER = "x-ostinato-conversation-id"


async def _key(url: str, owner: str) -> str:
    store = await open_store(url)
    try:
        return (await create_key(store, owner, "sdk test"))[1]
    finally:
        await store.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``ostinato serve`` (offline model, auth mode keys) and ann's key; one a module."""
    tmp_path = tmp_path_factory.mktemp("served")
    database = f"sqlite:///{tmp_path / 'sdk.db'}"
    key = asyncio.run(_key(database, "ann"))
    env = {"OSTINATO_MODEL": "offline:ostinato", "OSTINATO_AUTH__MODE": "keys"}
    server = Server(database, tmp_path / "data", tmp_path / "serve.log", env)
    url = server.start()
    try:
        yield url, key
    finally:
        server.kill()


def _streamed(client: openai.OpenAI, messages: list[dict[str, str]], cid: str) -> str:
    stream = client.chat.completions.create(
        model="ostinato",
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"conversation_id": cid},
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        usage = chunk.usage or usage
    assert usage is not None  # the usage chunk (zero for a completion ended by an approval)
    return text


def test_the_openai_sdk_holds_a_conversation_with_tools_and_an_approval(
    served: tuple[str, str],
) -> None:
    url, key = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{url}/v1", api_key="ost_wrong", max_retries=0).models.list()
    assert next(m.id for m in client.models.list()) == "ostinato"

    said = [{"role": "user", "content": "hello"}]
    raw = client.chat.completions.with_raw_response.create(model="ostinato", messages=said)  # type: ignore[arg-type]
    cid = raw.headers[HEADER]
    said.append({"role": "assistant", "content": raw.parse().choices[0].message.content or ""})

    said.append({"role": "user", "content": '/tool calculator {"expression": "6*7"}'})
    answer = _streamed(client, said, cid)
    assert answer == "Calling calculator.\n\nThe tool returned: 6*7 = 42"
    said.append({"role": "assistant", "content": answer})

    said.append({"role": "user", "content": '/tool shell {"command": "echo from-the-shell"}'})
    asked = _streamed(client, said, cid)
    assert "Waiting for your approval: shell" in asked
    said.append({"role": "assistant", "content": asked})
    said.append({"role": "user", "content": "yes"})
    done = client.chat.completions.create(
        model="ostinato",
        messages=said,  # type: ignore[arg-type]
        extra_headers={HEADER: cid},
    )
    assert "from-the-shell" in (done.choices[0].message.content or "")

    rows = httpx.get(
        f"{url}/v1/conversations/{cid}/messages",
        headers={"authorization": f"Bearer {key}"},
    ).json()["messages"]
    users = [r["blocks"][0]["text"] for r in rows if r["role"] == "user"]
    assert users == [
        "hello",
        '/tool calculator {"expression": "6*7"}',
        '/tool shell {"command": "echo from-the-shell"}',
    ]
    assistants = [r for r in rows if r["role"] == "assistant"]
    assert len(assistants) == 5  # hello, calculator (call + answer), shell (call + answer)


def _sum(expression: str) -> str:
    return f'/tool calculator {{"expression": "{expression}"}}'


def test_a_resent_history_that_edits_a_message_branches_there(served: tuple[str, str]) -> None:
    url, key = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    said: list[dict[str, str]] = []
    cid = ""
    for expression in ("1+1", "2+2", "3+3"):
        said.append({"role": "user", "content": _sum(expression)})
        raw = client.chat.completions.with_raw_response.create(
            model="ostinato",
            messages=said,  # type: ignore[arg-type]
            extra_body={"conversation_id": cid} if cid else None,
        )
        cid = raw.headers[HEADER]
        said.append({"role": "assistant", "content": raw.parse().choices[0].message.content or ""})
    # the person edits their second message: the client resends what came before it
    edited = [*said[:2], {"role": "user", "content": _sum("2+5")}]
    done = client.chat.completions.create(
        model="ostinato",
        messages=edited,
        extra_body={"conversation_id": cid},  # type: ignore[arg-type]
    )
    assert (done.choices[0].message.content or "").endswith("2+5 = 7")
    edited.append({"role": "assistant", "content": done.choices[0].message.content or ""})
    edited.append({"role": "user", "content": _sum("4+4")})  # and goes on from there
    client.chat.completions.create(
        model="ostinato",
        messages=edited,
        extra_body={"conversation_id": cid},  # type: ignore[arg-type]
    )
    trimmed = [edited[-1], {"role": "user", "content": _sum("5+5")}]  # its newest part only
    client.chat.completions.create(
        model="ostinato",
        messages=trimmed,
        extra_body={"conversation_id": cid},  # type: ignore[arg-type]
    )
    auth = {"authorization": f"Bearer {key}"}
    base = f"{url}/v1/conversations/{cid}"
    rows = httpx.get(f"{base}/messages", headers=auth).json()["messages"]
    users = [r for r in rows if r["role"] == "user"]
    assert [r["blocks"][0]["text"] for r in users] == [
        _sum("1+1"), _sum("2+5"), _sum("4+4"), _sum("5+5"),
    ]  # fmt: skip
    assert [s["current"] for s in users[1]["siblings"]] == [False, True]
    leaves = httpx.get(f"{base}/branches", headers=auth).json()["leaves"]
    assert len(leaves) == 2  # the first version of the second message, with its answer


def test_the_sdk_is_refused_with_another_servers_key(served: tuple[str, str]) -> None:
    url, _ = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-not-ours", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(
            model="ostinato", messages=[{"role": "user", "content": "hi"}]
        )
