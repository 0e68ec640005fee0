"""``ostinato export``, ``import`` and ``owners erase`` on a SQLite file: a ChatGPT file
imported for ann, exported as JSON and Markdown, the export imported again, then ann
erased."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ostinato.cli.main import main
from tests.store.test_store_transfer import chatgpt_file


def test_import_export_import_erase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'data.db'}"]
    chatgpt = tmp_path / "conversations.json"
    chatgpt.write_text(json.dumps(chatgpt_file()))
    assert main(["import", str(chatgpt), "--owner", "ann", *db]) == 0
    (cid,) = capsys.readouterr().out.split()
    exported = tmp_path / "ann.json"
    assert main(["export", "--owner", "ann", "-o", str(exported), *db]) == 0
    document = json.loads(exported.read_text())
    assert [c["title"] for c in document["conversations"]] == ["From ChatGPT"]
    assert main(["export", cid, "--format", "markdown", *db]) == 0
    assert "answer two" in capsys.readouterr().out
    assert main(["export", "--owner", "bob", *db]) == 0
    assert json.loads(capsys.readouterr().out)["conversations"] == []
    assert main(["import", str(exported), "--owner", "bob", *db]) == 1
    assert "owner:" in capsys.readouterr().err
    assert main(["import", str(exported), "--owner", "ann", *db]) == 0
    assert len(capsys.readouterr().out.split()) == 1
    assert main(["export", "nope", *db]) == 1
    capsys.readouterr()
    assert main(["owners", "erase", "ann", "--data-dir", str(tmp_path), *db]) == 0
    assert "2 conversation(s)" in capsys.readouterr().out
    assert main(["export", "--owner", "ann", *db]) == 0
    assert json.loads(capsys.readouterr().out)["conversations"] == []


def test_export_with_memories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from ostinato.store import open_store
    from ostinato.store.base import RememberFact

    url = f"sqlite:///{tmp_path / 'data.db'}"
    db = ["--database-url", url]

    async def remember() -> None:
        store = await open_store(url)
        try:
            await store.write(RememberFact("ann", "likes tea"), RememberFact("bob", "bob's"))
        finally:
            await store.close()

    asyncio.run(remember())
    exported = tmp_path / "ann.json"
    assert main(["export", "--owner", "ann", "--memories", "-o", str(exported), *db]) == 0
    assert [m["text"] for m in json.loads(exported.read_text())["memories"]] == ["likes tea"]
    assert main(["export", "x", "--format", "markdown", "--memories", *db]) == 2
    assert "no memories" in capsys.readouterr().err
    assert main(["import", str(exported), "--owner", "ann", *db]) == 0
    capsys.readouterr()
    assert main(["export", "--owner", "ann", "--memories", *db]) == 0
    texts = [m["text"] for m in json.loads(capsys.readouterr().out)["memories"]]
    assert texts == ["likes tea", "likes tea"]
