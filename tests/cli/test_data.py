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
