"""The sandbox holds: code that tries to escape, or to exhaust the server, does neither.

Each case runs real code in the real engine, in the sandbox's real worker processes.
Nothing here reaches the internet: refused addresses are refused before a connection,
and the one fetch that succeeds goes to a server on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ostinato.errors import ToolError
from ostinato.tools.fetch import Fetcher, FetchPolicy, FetchResult
from ostinato.tools.forge import CODE_LIMIT, Limits, Sandbox, SandboxError

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIMITS = Limits(cpu_s=1.0, wall_s=20.0, memory_bytes=32 * 1024 * 1024, output_bytes=64 * 1024)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sandbox() -> AsyncIterator[Sandbox]:
    """The production fetch policy: public addresses only."""
    box = Sandbox(limits=LIMITS, workers=2, fetcher=Fetcher(FetchPolicy()))
    yield box
    await box.aclose()


async def fails(box: Sandbox, code: str, args: dict[str, object] | None = None) -> SandboxError:
    with pytest.raises(SandboxError) as caught:
        await box.run(code, args or {}, network=True)
    return caught.value


async def still_serves(box: Sandbox) -> None:
    """After whatever happened, the sandbox runs the next tool as usual."""
    assert await box.run("(a) => a.c * 9 / 5 + 32", {"c": 100}) == 212


# --- it runs what it should ---------------------------------------------------------------


async def test_a_function_gets_its_arguments_and_returns_any_json(sandbox: Sandbox) -> None:
    code = "(a) => ({n: a.n + 1, s: a.s.toUpperCase(), l: [true, null, 1.5], o: {}})"
    out = await sandbox.run(code, {"n": 1, "s": "x"})
    assert out == {"n": 2, "s": "X", "l": [True, None, 1.5], "o": {}}
    assert await sandbox.run("() => undefined", {}) is None
    assert await sandbox.run("() => 'ünïcödé ✓'", {}) == "ünïcödé ✓"


async def test_an_async_function_is_awaited(sandbox: Sandbox) -> None:
    code = "async (a) => { const x = await Promise.resolve(a.x); return x * 2 }"
    assert await sandbox.run(code, {"x": 21}) == 42


async def test_the_code_s_own_errors_come_back_as_sentences(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "() => { throw new TypeError('no such unit') }")
    assert (error.limit, error.message) == ("error", "the code threw: TypeError: no such unit")
    assert isinstance(error, ToolError)
    error = await fails(sandbox, "async () => { null.x }")
    assert "cannot read property" in error.message
    error = await fails(sandbox, "(a) => {")
    assert "SyntaxError" in error.message
    error = await fails(sandbox, "42")
    assert error.message == "the code must be one JavaScript function expression"
    error = await fails(sandbox, "() => 10n")
    assert error.message.startswith("the result is not JSON")
    error = await fails(sandbox, "() => new Promise(() => {})")
    assert error.message == "the function's promise never settles"


async def test_code_over_the_size_cap_is_refused_before_it_runs() -> None:
    box = Sandbox(limits=LIMITS)
    code = "() => 1 //" + "x" * CODE_LIMIT
    with pytest.raises(SandboxError) as caught:
        await box.run(code, {})
    assert caught.value.limit == "code"
    assert not box._busy and not box._idle  # no worker was even started


# --- CPU, memory, stack, output, wall time -------------------------------------------------


async def test_an_infinite_loop_is_stopped_and_the_event_loop_keeps_going(
    sandbox: Sandbox,
) -> None:
    burn = asyncio.ensure_future(sandbox.run("() => { for (;;) {} }", {}))
    ticks = 0
    while not burn.done() and ticks < 5:
        await asyncio.sleep(0.01)  # the server's own work goes on while the code burns
        ticks += 1
    assert ticks == 5 and not burn.done()
    with pytest.raises(SandboxError) as caught:
        await burn
    assert caught.value.limit == "cpu"
    await still_serves(sandbox)


async def test_an_infinite_loop_in_a_promise_job_is_stopped(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "async () => { await null; while (true) {} }")
    assert error.limit == "cpu"


@pytest.mark.parametrize(
    "bomb",
    [
        "() => { const a = []; for (;;) a.push(new Array(1e6).fill(1)) }",
        "() => { const a = []; for (;;) a.push(new ArrayBuffer(1e7)) }",
        "() => { const a = []; for (;;) a.push(new Uint8Array(1e7).fill(7)) }",
        "() => { const o = {}; for (let i = 0; ; i++) o['k' + i] = {i, l: [i, i]} }",
        "() => 'x'.repeat(2 ** 28)",
        "async () => { const a = []; for (;;) a.push(new SharedArrayBuffer(1e7)) }",
        "() => JSON.stringify(new Array(1e7).fill('aaaaaaaaaa'))",
    ],
)
async def test_memory_bombs_stop_at_the_memory_limit(sandbox: Sandbox, bomb: str) -> None:
    error = await fails(sandbox, bomb)
    assert error.limit == "memory", error.message
    await still_serves(sandbox)


async def test_a_string_that_doubles_forever_is_refused(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "() => { let s = 'x'; for (;;) s += s }")
    assert error.limit in ("memory", "error")  # the engine's own length cap, or the limit
    await still_serves(sandbox)


async def test_deep_recursion_hits_the_stack_limit(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "function f(n) { return f(n + 1) + 1 }")
    assert error.limit == "stack"
    error = await fails(sandbox, "async () => { const f = (n) => f(n + 1) + 1; return f(0) }")
    assert error.limit == "stack"
    await still_serves(sandbox)


async def test_a_huge_result_is_refused(sandbox: Sandbox) -> None:
    error = await fails(sandbox, "() => 'y'.repeat(200000)")
    assert error.limit == "output"
    error = await fails(sandbox, "() => Array.from({length: 50000}, (_, i) => i)")
    assert error.limit == "output"
    await still_serves(sandbox)


async def test_a_run_past_its_wall_time_is_killed_and_the_next_run_gets_a_new_worker() -> None:
    class Stalls:
        async def fetch(self, url: str, method: str = "GET") -> FetchResult:
            await asyncio.sleep(60)
            raise AssertionError("never")

    box = Sandbox(limits=Limits(wall_s=0.5), workers=1, fetcher=Stalls())  # type: ignore[arg-type]
    try:
        with pytest.raises(SandboxError) as caught:
            await box.run(
                "async () => (await fetch('https://example.com/')).status", {}, network=True
            )
        assert caught.value.limit == "wall"
        assert not box._idle and not box._busy  # the worker was killed, not kept
        await still_serves(box)
    finally:
        await box.aclose()


async def test_a_worker_that_dies_takes_only_its_own_run(sandbox: Sandbox) -> None:
    run = asyncio.ensure_future(sandbox.run("() => { for (;;) {} }", {}))
    while not sandbox._busy:  # noqa: ASYNC110 (the run takes a worker on its first step)
        await asyncio.sleep(0)
    (worker,) = sandbox._busy
    worker.process.kill()
    with pytest.raises(SandboxError) as caught:
        await run
    assert caught.value.limit == "crash"
    await still_serves(sandbox)


# --- nothing of the host is reachable ----------------------------------------------------------

_LANGUAGE = """
    Object Function Error EvalError RangeError ReferenceError SyntaxError TypeError URIError
    InternalError AggregateError SuppressedError Iterator Array parseInt parseFloat isNaN
    isFinite queueMicrotask decodeURI decodeURIComponent encodeURI encodeURIComponent escape
    unescape Infinity NaN undefined eval Number Boolean String Math Reflect Symbol
    DisposableStack globalThis BigInt Date RegExp JSON Proxy Map Set WeakMap WeakSet
    ArrayBuffer SharedArrayBuffer Uint8ClampedArray Int8Array Uint8Array Int16Array
    Uint16Array Int32Array Uint32Array BigInt64Array BigUint64Array Float16Array Float32Array
    Float64Array DataView Atomics Promise AsyncDisposableStack WeakRef FinalizationRegistry
    DOMException btoa atob performance
"""
ECMASCRIPT = frozenset(_LANGUAGE.split())
OURS = {
    "fetch",
    "__ostinato_requests",
    "__ostinato_settle",
    "__ostinato_start",
    "__ostinato_outcome",
    "__ostinato_kind",
}


async def test_the_global_object_has_the_language_and_nothing_of_the_host(
    sandbox: Sandbox,
) -> None:
    names = await sandbox.run("() => Object.getOwnPropertyNames(globalThis)", {}, network=True)
    assert set(names) <= ECMASCRIPT | OURS, set(names) - ECMASCRIPT - OURS
    without = await sandbox.run("() => Object.getOwnPropertyNames(globalThis)", {})
    assert "fetch" not in without  # no network unless the tool uses it


@pytest.mark.parametrize(
    "probe",
    [
        "() => typeof require + typeof process + typeof std + typeof os + typeof Deno",
        "() => typeof globalThis.constructor.constructor('return this')().process",
        "() => typeof (function () { return this })().require",
        "() => Function('return typeof process')()",
        "() => eval('typeof std')",
        "() => typeof __ostinato_request",
        "() => Object.getPrototypeOf(async function () {}).constructor('return typeof os')()"
        ".then((t) => t)",
    ],
)
async def test_prototype_and_constructor_tricks_find_no_host(sandbox: Sandbox, probe: str) -> None:
    found = await sandbox.run(probe, {})
    assert "object" not in str(found) and "function" not in str(found), found


@pytest.mark.parametrize(
    "module", ["os", "std", "fs", "node:fs", "/etc/passwd", "./x.js", "qjs:os"]
)
async def test_imports_find_nothing(sandbox: Sandbox, module: str) -> None:
    code = (
        f"async () => {{ try {{ await import({module!r}); return 'imported' }} "
        "catch (e) { return String(e) } }"
    )
    assert "could not load module" in await sandbox.run(code, {})


def _environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


async def test_the_worker_has_none_of_the_server_s_environment(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSTINATO_TEST_SECRET", "hunter2")
    box = Sandbox(limits=LIMITS, workers=1)
    try:
        await box.run("() => 1", {})
        (worker,) = box._idle
        environ = (await asyncio.to_thread(_environ, worker.process.pid)).split(b"\0")
        names = {entry.split(b"=", 1)[0].decode() for entry in environ if entry}
        assert names <= {"LC_CTYPE"}, names  # Python may set the locale it coerced to
        assert os.environ["OSTINATO_TEST_SECRET"] == "hunter2"
    finally:
        await box.aclose()


# --- the network goes through the SSRF-safe fetch, and only there ------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1/",
        "http://localhost/",
        "http://[::1]/",
        "http://0x7f.1/",
        "http://2130706433/",
        "http://10.0.0.1/",
        "http://100.100.100.200/",
        "file:///etc/passwd",
        "http://127.0.0.1:22/",
    ],
)
async def test_fetching_private_addresses_is_refused(sandbox: Sandbox, url: str) -> None:
    code = (
        "async (a) => { try { await fetch(a.url); return 'fetched' } "
        "catch (e) { return String(e) } }"
    )
    answer = await sandbox.run(code, {"url": url}, network=True)
    assert answer.startswith("Error: ") and answer != "fetched", answer
    assert any(word in answer for word in ("refused", "not allowed", "only http", "not a public"))


async def test_only_get_and_head_and_only_so_many_requests(sandbox: Sandbox) -> None:
    code = (
        "async () => { try { await fetch('https://example.com/', {method: 'POST'}) } "
        "catch (e) { return String(e) } }"
    )
    assert await sandbox.run(code, {}, network=True) == "Error: only GET and HEAD, not POST"
    many = (
        "async () => (await Promise.allSettled(Array.from({length: 12}, () =>"
        " fetch('http://127.0.0.1/')))).map((r) => r.reason.message)"
    )
    reasons = await sandbox.run(many, {}, network=True)
    assert reasons.count(f"at most {LIMITS.fetches} requests a run") == 2


async def test_fetch_reaches_an_allowed_server_and_returns_its_body() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = json.dumps({"temp": 21.5}).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # The test server is on 127.0.0.1, which production refuses: checks off for it only.
    box = Sandbox(limits=LIMITS, fetcher=Fetcher(FetchPolicy(address_policy=None, ports=None)))
    try:
        code = "async (a) => { const r = await fetch(a.url); return [r.status, r.ok, r.json()] }"
        out = await box.run(code, {"url": f"http://127.0.0.1:{port}/w"}, network=True)
        assert out == [200, True, {"temp": 21.5}]
        no_network = await box.run("() => typeof fetch", {}, network=False)
        assert no_network == "undefined"
    finally:
        await box.aclose()
        server.close()
        await server.wait_closed()
