"""OpenTelemetry traces of the gateway, an optional extra: ``pip install 'toolwire[otel]'``.

A span per request, named by its method and the route it matched (``POST
/v1/chat/completions``, ``GET /v1/responses/{rid}``: a fixed template, never an id; the
method alone for a path no route has), with the path itself, the API, the model, the status,
the calls and the notices of its turn as attributes, and a child span, ``upstream``, for
the exchange with the model behind (from the turn's start to its last event). The
exporter is the one the standard ``OTEL_*`` environment variables name
(``OTEL_TRACES_EXPORTER``: ``otlp``, the default, at ``OTEL_EXPORTER_OTLP_ENDPOINT``;
``console``; ``none``), the service as ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` say.

Nothing here imports OpenTelemetry until traces are asked for (``serve --traces``, an
``OTEL_EXPORTER_OTLP_ENDPOINT`` in the environment with the extra installed, or a tracer
handed to ``create_app``): without the extra the gateway runs as before, and ``--traces``
without it is a usage error when ``serve`` starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec
from typing import Any

from ..errors import UsageError
from .metrics import Turn

__all__ = ["Tracing", "tracer_from_environment", "traces_wanted"]

_INSTALL = "traces need the otel extra: pip install 'toolwire[otel]'"
#: The longest a client's text (a path, a model's name) is in an attribute.
_LONGEST = 200


class Tracing:
    """Spans of the gateway's requests through ``tracer`` (an OpenTelemetry ``Tracer``)."""

    def __init__(self, tracer: Any) -> None:
        from opentelemetry import trace

        self._tracer = tracer
        self._trace = trace

    def request(self, turn: Turn) -> Any:
        """The span of one request, started now (not made current: the turn's events are
        read in other tasks, so its child is given it explicitly), named by its method until
        its route is known (:meth:`end`)."""
        return self._tracer.start_span(
            turn.method,
            kind=self._trace.SpanKind.SERVER,
            attributes={"http.request.method": turn.method, "url.path": turn.path[:_LONGEST]},
        )

    def upstream(self, parent: Any, model: str) -> Any:
        """The child span of the exchange with the model behind, started now."""
        return self._tracer.start_span(
            "upstream",
            context=self._trace.set_span_in_context(parent),
            kind=self._trace.SpanKind.CLIENT,
            attributes={"toolwire.model": model[:_LONGEST]},
        )

    def end_upstream(self, span: Any, turn: Turn) -> None:
        if turn.upstream_error:
            span.set_attribute("error.type", turn.upstream_error)
            span.set_status(self._trace.StatusCode.ERROR, turn.upstream_error)
        span.end()

    def end(self, span: Any, turn: Turn, route: str = "") -> None:
        """The request's attributes, once its response has ended, and its name by its
        ``route`` (a template, :func:`~toolwire.server.observe.route`); then the span ends."""
        if route:
            span.update_name(f"{turn.method} {route}")
            span.set_attribute("http.route", route)
        span.set_attribute("http.response.status_code", turn.status)
        span.set_attribute("toolwire.api", turn.api)
        if turn.model:
            span.set_attribute("toolwire.model", turn.model[:_LONGEST])
        span.set_attribute("toolwire.calls", turn.calls)
        if turn.calls:
            span.set_attribute("toolwire.calls.way", turn.way)
        if turn.notices:
            span.set_attribute("toolwire.notices", sorted(turn.notices))
        if turn.prompt_tokens or turn.completion_tokens:
            span.set_attribute("gen_ai.usage.input_tokens", turn.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", turn.completion_tokens)
        if turn.upstream_error:
            span.set_attribute("error.type", turn.upstream_error)
        if turn.status >= 500:
            span.set_status(self._trace.StatusCode.ERROR, f"status {turn.status}")
        span.end()


def tracer_from_environment() -> Any:
    """A tracer exporting as the ``OTEL_*`` environment variables say (see the module's
    docstring); :class:`UsageError` when the extra, or the exporter named, is missing."""
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise UsageError(_INSTALL) from None
    provider = TracerProvider(resource=Resource.create({"service.name": _service()}))
    for name in _exporters():
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            provider.add_span_processor(BatchSpanProcessor(_otlp()))
        elif name != "none":
            raise UsageError(
                f"OTEL_TRACES_EXPORTER names {name!r}; toolwire knows otlp, console and none"
            )
    return provider.get_tracer("toolwire")


def traces_wanted(forced: bool, environ: Mapping[str, str]) -> bool:
    """Whether the gateway traces: asked (``--traces``; without the extra,
    :func:`tracer_from_environment` then says so), or an OTLP endpoint set in the
    environment (``OTEL_EXPORTER_OTLP_ENDPOINT``, or its ``_TRACES_`` one) with the extra
    installed: the standard variables alone turn traces on, as the SDK's own tools do."""
    if forced:
        return True
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    if not endpoint or environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    try:
        return find_spec("opentelemetry.sdk") is not None
    except ModuleNotFoundError:  # no opentelemetry at all
        return False


def _service() -> str:
    return os.environ.get("OTEL_SERVICE_NAME") or "toolwire"


def _exporters() -> list[str]:
    given = os.environ.get("OTEL_TRACES_EXPORTER", "otlp")
    return [name.strip() for name in given.split(",") if name.strip()] or ["otlp"]


def _otlp() -> Any:
    """OTLP's exporter, over the protocol ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` names
    (``http/protobuf`` by default, or ``grpc``)."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as Grpc,
            )

            return Grpc()
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    except ImportError:
        package = "grpc" if protocol == "grpc" else "http"
        raise UsageError(
            f"the OTLP exporter over {protocol} is not installed: "
            f"pip install opentelemetry-exporter-otlp-proto-{package}"
        ) from None
