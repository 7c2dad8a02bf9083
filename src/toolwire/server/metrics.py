"""The gateway's Prometheus metrics, served at ``/metrics``.

What any gateway counts (requests by API, model and status; their latency; tokens; upstream
errors by kind; clients cut for reading nothing of their reply) and what only this one can:
the calls it recovered from a reply's text or healed past a refusal, and every notice it
gave, by code and per model — the pipeline's own account of what it did, read from the
:class:`~toolwire.events.Notice` events of each turn.

Each app has its own :class:`Metrics` and its own registry (two apps in one process, and
the tests, stay apart), except with several processes: when ``PROMETHEUS_MULTIPROC_DIR``
is set (``serve --workers N`` sets it to a directory of its own), prometheus_client's
multiprocess mode writes each process's values there and ``/metrics`` adds up every
process's, whichever worker answers the scrape. The values then live in that directory,
not in one registry: one :class:`Metrics` per process.

A model's name is a label, and clients choose names (an upstream passed every client's
model): so a label is only ever a name the gateway was configured with (its ``--config``
entries, or the one model its flags serve); any other name is counted as ``other``
(:attr:`Turn.label`, set by :mod:`.observe`). Every other label is the gateway's own word
(an API, a status, a notice's code, a failure's kind): nothing a client sends becomes a
series, in one process's registry or in the files of ``--workers``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter as Tally
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client import multiprocess as shared
from prometheus_client.exposition import generate_latest

__all__ = ["CONTENT_TYPE", "MULTIPROC_DIR", "OTHER", "Metrics", "Turn", "shared_values"]

#: The variable that puts prometheus_client in multiprocess mode, naming its directory.
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: The content type of the text exposition format.
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: The label of a model the gateway was not configured with by name.
OTHER = "other"
#: Latency buckets, in seconds: a plain answer takes milliseconds, a long one minutes.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass
class Turn:
    """What one request to the gateway was and did: filled in as it goes (the API from its
    path, the model when it is known, each notice, call and token as the turn's events
    pass), then recorded once, when its response has ended — by the metrics, the trace and
    the access log alike."""

    method: str
    path: str
    api: str
    #: The model's name as served (a client's own, for an upstream passed every name).
    model: str = ""
    #: The model's metric label: a configured name, or ``other`` (``""`` before a model).
    label: str = ""
    status: int = 0
    seconds: float = 0.0
    notices: Tally[str] = field(default_factory=Tally)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The kind of the upstream failure (a BackendError's ``kind``), when there was one.
    upstream_error: str = ""
    #: The name of the API key the request came with (never the key), when keys are set.
    key: str = ""

    @property
    def way(self) -> str:
        """How the turn's calls came: ``recovered`` from text the grammar does not read,
        ``healed`` past a refusal, or ``plain``."""
        if any(code.startswith("recovered-") for code in self.notices):
            return "recovered"
        if any(code.startswith("healed-") for code in self.notices):
            return "healed"
        return "plain"


class Metrics:
    """The gateway's instruments, in a registry of their own (see the module's docstring
    for several processes)."""

    def __init__(self) -> None:
        self._multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        # in multiprocess mode the values go to files; a registry is made for each scrape
        own = None if self._multiprocess else CollectorRegistry(auto_describe=True)
        self.registry = own
        self.requests = Counter(
            "toolwire_requests",
            "Requests answered, by client API, model and HTTP status",
            ["api", "model", "status"],
            registry=own,
        )
        self.latency = Histogram(
            "toolwire_request_seconds",
            "Seconds from a request's arrival to its response's last byte",
            ["api", "model"],
            buckets=_BUCKETS,
            registry=own,
        )
        self.tokens = Counter(
            "toolwire_tokens",
            "Tokens the model read (prompt) and wrote (completion), as its usage says",
            ["model", "kind"],
            registry=own,
        )
        self.upstream_errors = Counter(
            "toolwire_upstream_errors",
            "Turns the model behind failed, by kind (refused, unreachable, timeout, …)",
            ["model", "kind"],
            registry=own,
        )
        self.calls = Counter(
            "toolwire_calls",
            "Tool calls passed on, by how they came: plain, recovered from text, or healed",
            ["model", "way"],
            registry=own,
        )
        self.notices = Counter(
            "toolwire_notices",
            "Notices the pipeline gave, by code (docs/notices.md) and model",
            ["model", "code"],
            registry=own,
        )
        self.cut = Counter(
            "toolwire_clients_cut",
            "Connections cut because the client took none of its reply's bytes for the send "
            "deadline (serve --send-timeout), by client API",
            ["api"],
            registry=own,
        )

    def record(self, turn: Turn) -> None:
        """Count one request, once its response has ended, under its model's label."""
        model = turn.label
        self.requests.labels(turn.api, model, str(turn.status)).inc()
        self.latency.labels(turn.api, model).observe(turn.seconds)
        if turn.prompt_tokens:
            self.tokens.labels(model, "prompt").inc(turn.prompt_tokens)
        if turn.completion_tokens:
            self.tokens.labels(model, "completion").inc(turn.completion_tokens)
        if turn.upstream_error:
            self.upstream_errors.labels(model, turn.upstream_error).inc()
        if turn.calls:
            self.calls.labels(model, turn.way).inc(turn.calls)
        for code, count in turn.notices.items():
            self.notices.labels(model, code).inc(count)

    def exposition(self) -> bytes:
        """The text a scrape of ``/metrics`` gets: this app's values, or with several
        processes every process's, added up."""
        if self.registry is not None:
            return bytes(generate_latest(self.registry))
        registry = CollectorRegistry()
        shared.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return bytes(generate_latest(registry))


@contextmanager
def shared_values(workers: int, environ: MutableMapping[str, str]) -> Iterator[str | None]:
    """While ``serve --workers N`` runs (N above 1): a directory of its own for every
    worker's values, named in ``environ`` (each worker process inherits it), so a scrape of
    any worker counts them all; removed, and the variable with it, when the gateway ends.
    The operator's own directory, when ``PROMETHEUS_MULTIPROC_DIR`` is set, is kept as it
    is. One process needs none: its values are in its registry."""
    if workers < 2 or environ.get(MULTIPROC_DIR):
        yield environ.get(MULTIPROC_DIR) or None
        return
    directory = tempfile.mkdtemp(prefix="toolwire-metrics-")
    environ[MULTIPROC_DIR] = directory
    try:
        yield directory
    finally:
        environ.pop(MULTIPROC_DIR, None)
        shutil.rmtree(directory, ignore_errors=True)
