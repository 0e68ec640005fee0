"""Installing the backends a deployment asks for (``ostinato serve`` calls ``configure``).

Traces: when the standard OpenTelemetry variables ask for an OTLP export
(``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, and
neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``), the SDK is imported
and spans are exported over OTLP/HTTP in batches; the exporter reads the other ``OTEL_*``
variables itself (headers, timeout, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``).
Metrics: when ``observability.metrics`` is on. Neither asked for: nothing is imported and
the no-op backend stays installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ostinato.observe import backend as _backend

if TYPE_CHECKING:
    from ostinato.config.observability import ObservabilitySection
    from ostinato.observe.prometheus import PrometheusBackend


class ObservabilityUnavailable(RuntimeError):
    """Traces or metrics were asked for but their extra is not installed."""


def traces_wanted(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


@dataclass
class Installed:
    """What ``configure`` installed; ``close`` flushes and uninstalls it."""

    backends: list[_backend.Backend] = field(default_factory=list)
    metrics: PrometheusBackend | None = None

    @property
    def traces(self) -> bool:
        return any(type(b).__name__ == "OtelBackend" for b in self.backends)

    def close(self) -> None:
        _backend.install(None)
        for backend in self.backends:
            backend.shutdown()


def otlp_backend(*, capture_content: bool) -> _backend.Backend:
    """Traces exported over OTLP/HTTP as the ``OTEL_*`` variables say."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from ostinato.observe.otel import OtelBackend
    except ImportError as exc:
        raise ObservabilityUnavailable(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
            "pip install 'ostinato[otel]'"
        ) from exc
    resource = Resource.create({"service.name": "ostinato"} | _service_name())
    processor = BatchSpanProcessor(OTLPSpanExporter())
    return OtelBackend(processor, resource, capture_content=capture_content)


def _service_name() -> dict[str, str]:
    name = os.environ.get("OTEL_SERVICE_NAME")
    return {"service.name": name} if name else {}


def prometheus_backend() -> PrometheusBackend:
    try:
        from ostinato.observe.prometheus import PrometheusBackend
    except ImportError as exc:
        raise ObservabilityUnavailable(
            "observability.metrics is on but prometheus-client is not installed: "
            "pip install 'ostinato[metrics]'"
        ) from exc
    return PrometheusBackend()


def configure(
    settings: ObservabilitySection, environ: Mapping[str, str] | None = None
) -> Installed:
    """Install the backends ``settings`` and ``environ`` (default: ``os.environ``) ask
    for; ``ObservabilityUnavailable`` if one's extra is missing."""
    environ = os.environ if environ is None else environ
    installed = Installed()
    if traces_wanted(environ):
        installed.backends.append(otlp_backend(capture_content=settings.capture_content))
    if settings.metrics:
        installed.metrics = prometheus_backend()
        installed.backends.append(installed.metrics)
    _backend.install(installed.backends)
    return installed
