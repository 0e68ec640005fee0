"""``ostinato keys``: a key is printed once, stored as a hash, listed without its secret,
and refused once revoked."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ostinato.cli.main import main
from ostinato.identity.keys import matches, parse_key
from ostinato.store import open_store


def test_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    db = ["--database-url", url]
    assert (
        main(["keys", "create", "--owner", "ann", "--name", "laptop", "--expires-in", "90d", *db])
        == 0
    )
    key = capsys.readouterr().out.strip()
    presented = parse_key(key)
    assert presented is not None

    async def stored() -> list[object]:
        store = await open_store(url)
        try:
            found = await store.get_api_key(presented.key_id)
            assert found is not None and matches(found, presented)
            assert presented.secret not in repr(found) and found.expires_at is not None
            return list(await store.list_api_keys())
        finally:
            await store.close()

    assert len(asyncio.run(stored())) == 1
    assert main(["keys", "list", *db]) == 0
    listing = capsys.readouterr().out
    assert presented.key_id in listing and "ann" in listing and "active" in listing
    assert presented.secret not in listing
    assert main(["keys", "revoke", presented.key_id, *db]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["keys", "list", "--owner", "ann", *db]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["keys", "revoke", "nope", *db]) == 1
    assert "no API key" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--owner", "local", "--name", "x"],
        ["--owner", "anon:x", "--name", "x"],
        ["--owner", "ann", "--name", "x", "--expires-in", "soon"],
        ["--owner", "ann", "--name", " "],
    ],
)
def test_bad_keys_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    assert main(["keys", "create", *argv, "--database-url", url]) == 2
    assert capsys.readouterr().out == ""
