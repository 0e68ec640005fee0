"""The hub that carries frames between ``serve --workers`` processes (``fanout_local``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ostinato.fanout_local import LIMIT, Hub, HubTransport


async def test_every_line_reaches_every_worker_in_order_and_a_lost_hub_is_told(
    tmp_path: Path,
) -> None:
    hub = Hub(str(tmp_path / "hub.sock"))
    await hub.start()
    got: dict[str, list[str]] = {"a": [], "b": []}
    lost: list[str] = []
    a, b = HubTransport(hub.path), HubTransport(hub.path)
    for name, transport in (("a", a), ("b", b)):
        await transport.connect(got[name].append, lambda exc, n=name: lost.append(n))
    assert a.limit == LIMIT  # the relay cuts bigger bodies into parts
    await a.send(["o1 1 0/1 {}", "o1 2 0/1 {}"])
    await b.send(["o2 1 0/1 {}"])
    for _ in range(100):
        if len(got["a"]) == len(got["b"]) == 3:
            break
        await asyncio.sleep(0.01)
    for lines in got.values():  # the sender too; one sender's lines in its order
        assert sorted(lines) == ["o1 1 0/1 {}", "o1 2 0/1 {}", "o2 1 0/1 {}"]
        assert lines.index("o1 1 0/1 {}") < lines.index("o1 2 0/1 {}")
    await hub.close()
    for _ in range(100):
        if len(lost) == 2:
            break
        await asyncio.sleep(0.01)
    assert sorted(lost) == ["a", "b"]
    await a.close()
    await b.close()
