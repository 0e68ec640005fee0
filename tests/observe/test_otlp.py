"""Traces over a real OTLP/HTTP export: ``observe.setup`` reads the standard OTEL_*
variables, and a local receiver (http.server, decoding the protobuf body with
opentelemetry-proto) gets a turn's spans naming the model, the tokens and the tool.
Without the variables nothing is installed and the SDK is not imported."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # makes `tests` importable

from ostinato import observe
from ostinato.config.observability import ObservabilitySection
from ostinato.observe import setup
from tests.observe.scenario import run_scenario


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, ExportTraceServiceRequest]] = []


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append((self.path, request))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def value(attribute: Any) -> Any:
    kind = attribute.value.WhichOneof("value")
    return getattr(attribute.value, kind)


@pytest.mark.parametrize("timelines", [True, False], ids=["timelines", "no-timelines"])
async def test_a_turn_is_exported_over_otlp_http(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, timelines: bool
) -> None:
    """The same spans whether turns keep their timelines or not (an installed backend
    gets the full scopes either way)."""
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "ostinato-test")
    kept = observe.keep_timelines(timelines)
    installed = setup.configure(ObservabilitySection())
    try:
        assert installed.traces and installed.metrics is None
        ran = await run_scenario()
    finally:
        installed.close()  # flushes the batch
        observe.keep_timelines(kept)
    assert observe.installed() is observe.backend.NOOP
    assert receiver.requests and all(path == "/v1/traces" for path, _ in receiver.requests)
    spans: dict[str, dict[str, Any]] = {}
    services = set()
    for _, request in receiver.requests:
        for resource in request.resource_spans:
            services |= {value(a) for a in resource.resource.attributes if a.key == "service.name"}
            for scope in resource.scope_spans:
                for span in scope.spans:
                    spans.setdefault(span.name, {a.key: value(a) for a in span.attributes})
    assert services == {"ostinato-test"}
    call = spans["chat lead"]
    assert call["gen_ai.request.model"] == "lead" and call["gen_ai.provider.name"] == "test"
    assert call["gen_ai.usage.input_tokens"] == 1 and call["gen_ai.usage.output_tokens"] == 1
    assert call["gen_ai.conversation.id"] == ran.conversation_id
    tool = spans["execute_tool delegate"]
    assert tool["gen_ai.tool.name"] == "delegate" and tool["ostinato.tool.status"] == "ok"
    assert "invoke_agent lead" in spans


def test_without_the_variables_nothing_is_installed_or_imported() -> None:
    code = (
        "import sys\n"
        "from ostinato.config.observability import ObservabilitySection\n"
        "from ostinato.observe import setup, installed, backend\n"
        "import ostinato.server\n"
        "got = setup.configure(ObservabilitySection(), environ={})\n"
        "assert installed() is backend.NOOP and not got.backends\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk', "
        "'prometheus_client', 'ostinato.observe.otel', 'ostinato.observe.prometheus'))]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_SERVICE_NAME": "a"}, False),
    ],
)
def test_which_variables_ask_for_traces(environ: dict[str, str], wanted: bool) -> None:
    assert setup.traces_wanted(environ) is wanted


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "ostinato.observe.prometheus", None)
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    with pytest.raises(setup.ObservabilityUnavailable, match=r"ostinato\[otel\]"):
        setup.configure(ObservabilitySection(), environ)
    with pytest.raises(setup.ObservabilityUnavailable, match=r"ostinato\[metrics\]"):
        setup.configure(ObservabilitySection(metrics=True), {})
    assert observe.installed() is observe.backend.NOOP
