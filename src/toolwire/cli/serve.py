"""``toolwire serve``: its arguments, the models it stands before (a config's, or the one
its flags name), and running it in one process or several.

The gateway (:mod:`toolwire.server`) and uvicorn are imported when the command runs, not
when the command line is built."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .common import MODEL_HELP, OLLAMA_HELP, OLLAMA_URL, backend_spec

if TYPE_CHECKING:
    from ..pipeline import Backend
    from ..server.config import ModelEntry, Models

__all__ = ["add_serve", "serve_app", "served_models", "store_limits"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Where ``serve --workers N`` leaves its options for the worker processes (JSON).
_SERVE_ENV = "TOOLWIRE_SERVE"
#: What ``--log-format`` takes: :data:`toolwire.server.logs.FORMATS` (not imported until
#: the command runs; a test holds them equal).
LOG_FORMATS = ("text", "json")
#: What uvicorn imports in each ``serve --workers N`` process.
SERVE_APP = f"{__name__}:serve_app"


def _gateway(args: argparse.Namespace) -> Any:
    """The gateway app ``serve`` runs, from its options (one place for one worker or many)."""
    from ..server import create_app, freeze_heap
    from ..server.keys import Keys
    from ..store import open_response_store

    keys = Keys.given(args.api_key, getattr(args, "api_keys", None), os.environ)
    where = getattr(args, "store", None)
    store = None if args.no_store else open_response_store(where, store_limits(args))
    tracer = _tracer(args)
    sending = getattr(args, "send_timeout", None)  # None: the gateway's own default
    limits = {"send_timeout": sending} if sending is not None else {}
    app = create_app(served_models(args), keys=keys, store=store, tracer=tracer, **limits)
    freeze_heap()
    return app


def _tracer(args: argparse.Namespace) -> Any:
    """The tracer of ``--traces`` or of ``$OTEL_EXPORTER_OTLP_ENDPOINT`` (None: no traces)."""
    from ..server.tracing import tracer_from_environment, traces_wanted

    if not traces_wanted(getattr(args, "traces", False), os.environ):
        return None
    return tracer_from_environment()


def serve_app() -> Any:
    """The gateway app of one ``serve --workers N`` process: uvicorn starts each worker from
    an import string, not an app, so each builds its own from the options ``serve`` left in
    ``$TOOLWIRE_SERVE`` (its logs set up as the supervisor's were)."""
    from ..server.logs import use_format

    args = argparse.Namespace(**json.loads(os.environ[_SERVE_ENV]))
    use_format(getattr(args, "log_format", "text"))
    return _gateway(args)


def _build(
    entry: ModelEntry,
    *,
    timeout: float,
    connect_timeout: float,
    clients: dict[str, Any],
    memory: Any,
) -> Backend:
    """A backend for one served model, by the one factory: every model at one server shares
    one pool of connections (kept in ``clients`` by its address) for as long as the gateway
    serves, with the request deadline and connect timeout of the flags, and the gateway's
    own ``memory`` of what models taught (never the library's process-wide default); a
    local model is loaded now (the gateway calls this on first use)."""
    from ..backends.factory import build_backend

    assert entry.spec is not None
    spec = entry.spec
    if spec.kind != "local":
        spec = replace(spec, timeout=timeout, connect_timeout=connect_timeout)
    return build_backend(spec, clients=clients, memory=memory)


def served_models(args: argparse.Namespace) -> Models:
    """The models ``serve`` stands before: a config's, or the one the flags name (an
    upstream or Ollama without a model's name is asked for the model each client names)."""
    from ..pipeline import ModelMemory
    from ..server.config import ModelEntry, Models, read_config

    build = partial(
        _build,
        timeout=args.upstream_timeout,
        connect_timeout=args.connect_timeout,
        clients={},
        memory=ModelMemory(),
    )
    if args.config:
        flags = (args.upstream, args.model, args.upstream_model, getattr(args, "tool_format", None))
        if any(flags) or args.ollama is not None or getattr(args, "ctx", None) is not None:
            raise UsageError(
                "--config lists the models (each its own ctx and tool_format); give no "
                "--model, --upstream, --ollama, --ctx or --tool-format with it"
            )
        return Models(read_config(args.config), build)
    if args.ollama is not None and (args.upstream or args.upstream_model):
        raise UsageError(
            "give --ollama (with --model) or --upstream (with --upstream-model), not both"
        )
    remote = args.ollama is not None or args.upstream
    name = args.model if args.ollama is not None else args.upstream_model
    tool_format = getattr(args, "tool_format", None)
    if tool_format is not None:
        from ..backends.factory import check_tool_format

        check_tool_format(tool_format, "--tool-format")
    spec = backend_spec(
        local=None if remote else args.model,
        base_url=args.upstream,
        ollama=args.ollama,
        model=name,
        api_key=args.upstream_key,
        ctx=args.ctx,
        tool_format=tool_format,
        url_flag="--upstream",
        model_flag="--upstream-model",
        any_model=True,
    )
    if getattr(args, "engine", None) is not None:
        if spec.kind != "openai":
            raise UsageError("--engine names the engine at --upstream; give --upstream too")
        spec = replace(spec, engine=args.engine)
    if remote and not name:
        return Models([], build, passed=ModelEntry("passed", spec))
    if spec.kind == "local":
        from ..models import local_model

        path = local_model(spec.model)
        entry = ModelEntry(path.stem, replace(spec, model=str(path)))
    else:
        entry = ModelEntry(name, spec)
    return Models.single(build(entry), entry.name)


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ..server.config import check_environment, check_files, read_config
    from ..server.guard import uvicorn_settings
    from ..server.keys import Keys
    from ..server.logs import use_format
    from ..server.metrics import shared_values
    from ..server.tracing import tracer_from_environment, traces_wanted

    if args.host not in _LOOPBACK and not Keys.given(args.api_key, args.api_keys, os.environ):
        raise UsageError(
            f"listening on {args.host} needs a key: --api-keys FILE, $TOOLWIRE_API_KEYS or "
            "$TOOLWIRE_API_KEY (or --api-key TOKEN); clients send it as a bearer token; "
            "on loopback it is optional"
        )
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.config:  # a bad config, or a gguf that is not a model, is told here, not later
        entries = read_config(args.config)
        check_files(entries)
        check_environment(entries, os.environ)
    if args.workers > 1 and traces_wanted(args.traces, os.environ):
        tracer_from_environment()  # a missing extra or exporter is told here, not by a worker
    use_format(args.log_format)
    # slow clients: deadlines for each request's headers and body (toolwire.server.guard)
    settings: dict[str, Any] = {
        **uvicorn_settings(),
        "host": args.host,
        "port": args.port,
        # SIGTERM or Ctrl-C: no new connections; streams in flight get this long to end
        "timeout_graceful_shutdown": args.shutdown_timeout,
    }
    if args.log_format == "json":  # logs.use_format set them up; uvicorn keeps to that
        settings.update(log_config=None, log_level="info", access_log=False)
    else:
        settings["log_level"] = "warning"
    where = f"http://{args.host}:{args.port}/v1"
    many = f" from {args.workers} processes" if args.workers > 1 else ""
    if args.workers == 1:
        app = _gateway(args)
        _said(args, f"toolwire: serving at {where}{many}")
        with _stopped_by_signal():
            uvicorn.run(app, **settings)
        _said(args, "toolwire: stopped")
        return 0
    options = {k: v for k, v in vars(args).items() if not callable(v)}
    os.environ[_SERVE_ENV] = json.dumps(options)
    with shared_values(args.workers, os.environ):  # /metrics of any worker counts them all
        _said(args, f"toolwire: serving at {where}{many}")
        uvicorn.run(SERVE_APP, factory=True, workers=args.workers, **settings)
    _said(args, "toolwire: stopped")
    return 0


@contextmanager
def _stopped_by_signal() -> Iterator[None]:
    """While uvicorn serves in this process: SIGTERM and SIGINT, once uvicorn has shut down
    gracefully for them, end the command with status 0. (uvicorn raises the signal again
    after its shutdown, to the handler it found: the default one would kill the process by
    it, or print a KeyboardInterrupt's traceback, after a stop that went as it should.)"""
    wanted = (signal.SIGTERM, signal.SIGINT)
    before = {sig: signal.getsignal(sig) for sig in wanted}
    for sig in wanted:
        signal.signal(sig, lambda *_: None)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _said(args: argparse.Namespace, line: str) -> None:
    """A line of the gateway's own on stderr: a JSON log line with ``--log-format json``."""
    if args.log_format == "json":
        import logging

        logging.getLogger("toolwire.serve").info(line)
    else:
        print(line, file=sys.stderr)


def _seconds(text: str) -> float:
    """A number of seconds above 0, for a timeout flag."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


#: A duration's units, in seconds (``--store-ttl 30d``).
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: A size's units, in bytes (``--store-key-bytes 256M``).
_SIZES = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _duration(text: str) -> float:
    """Seconds above 0: a number, or one with a unit (``90s``, ``45m``, ``12h``, ``30d``)."""
    given = text.strip().lower()
    unit = _UNITS.get(given[-1:], 0) if given else 0
    try:
        value = float(given[:-1] if unit else given) * (unit or 1)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e10:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a duration above 0: seconds, or a number with s, m, h or d"
        )
    return value


def _size(text: str) -> int:
    """Bytes above 0: a whole number, or one with K, M or G (1024s)."""
    given = text.strip().lower().removesuffix("b")
    unit = given[-1:] if given[-1:] in _SIZES else ""
    digits = given[: len(given) - len(unit)]
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 15 and int(digits) > 0):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a size above 0: bytes, or a whole number with K, M or G"
        )
    return int(digits) * _SIZES[unit]


def _count(text: str) -> int:
    """A whole number above 0."""
    given = text.strip()
    if not (given.isascii() and given.isdigit() and len(given) <= 15 and int(given) > 0):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number above 0")
    return int(given)


#: Each ``--store-…`` flag, the :class:`~toolwire.store.responses.StoreLimits` field it sets.
_STORE_FLAGS = {
    "store_ttl": "ttl",
    "store_history_bytes": "history_bytes",
    "store_history_messages": "history_messages",
    "store_key_bytes": "key_bytes",
    "store_key_responses": "key_responses",
}


def store_limits(args: argparse.Namespace) -> Any:
    """The :class:`~toolwire.store.responses.StoreLimits` the ``--store-…`` flags give (the
    contract's default for each one not given)."""
    from ..store.responses import StoreLimits

    given = {field: getattr(args, flag, None) for flag, field in _STORE_FLAGS.items()}
    return StoreLimits(**{field: value for field, value in given.items() if value is not None})


def add_serve(v: argparse.ArgumentParser) -> None:
    v.add_argument(
        "--model", help=f"to serve in-process: {MODEL_HELP}; with --ollama, the model's name there"
    )
    v.add_argument("--upstream", metavar="URL", help="an OpenAI-compatible server to stand before")
    v.add_argument(
        "--upstream-model",
        help="the model's name at --upstream (default: the model each client names)",
    )
    v.add_argument(
        "--config",
        metavar="FILE",
        help="a models.toml: many models behind one address, picked by each request's model",
    )
    v.add_argument("--ollama", nargs="?", const=OLLAMA_URL, metavar="URL", help=OLLAMA_HELP)
    v.add_argument("--upstream-key", help="the upstream's key (default: $OPENAI_API_KEY)")
    v.add_argument(
        "--engine",
        choices=("openai", "vllm", "llama-server", "generic"),
        help="the engine at --upstream: vllm and llama-server are asked to constrain a "
        "required call as they document (default: openai at OpenAI's host, else generic)",
    )
    v.add_argument(
        "--upstream-timeout",
        type=_seconds,
        default=120.0,
        metavar="SECONDS",
        help="the deadline of each upstream request, to the reply's last byte (default: 120)",
    )
    v.add_argument(
        "--connect-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="the time to connect to the upstream (default: 10)",
    )
    v.add_argument(
        "--send-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="how long a client may take none of its reply's bytes before it is cut, its "
        "upstream stream closed (default: 30)",
    )
    v.add_argument(
        "--no-store",
        action="store_true",
        help="keep no Responses conversations (previous_response_id, store: true)",
    )
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    # keys and the response store
    v.add_argument(
        "--api-key", help="one key clients must send, named default (needed off loopback)"
    )
    v.add_argument(
        "--api-keys",
        metavar="FILE",
        help="keys clients may send, one 'name key' a line; each name owns the responses "
        "its key stores (default: $TOOLWIRE_API_KEYS, a file or lines; $TOOLWIRE_API_KEY)",
    )
    v.add_argument(
        "--store",
        metavar="URL|PATH",
        help="where Responses are kept: a path, sqlite:///PATH or postgresql://… "
        "(default: the gateway's own gateway.db, apart from the CLI's conversations)",
    )
    v.add_argument(
        "--store-ttl",
        type=_duration,
        metavar="DURATION",
        help="how long a stored response is kept after it was made or last continued: "
        "seconds, or 90s, 45m, 12h, 30d (default: 30d)",
    )
    v.add_argument(
        "--store-history-bytes",
        type=_size,
        metavar="SIZE",
        help="the most a conversation continued by previous_response_id may hold, in bytes "
        "(or K, M, G); past it a continuation is refused (default: 8M)",
    )
    v.add_argument(
        "--store-history-messages",
        type=_count,
        metavar="N",
        help="the most messages a conversation continued by previous_response_id may hold "
        "(default: 10000)",
    )
    v.add_argument(
        "--store-key-bytes",
        type=_size,
        metavar="SIZE",
        help="the most each key's stored responses may take, in bytes (or K, M, G); past it "
        "a request asking to store is refused (default: 256M)",
    )
    v.add_argument(
        "--store-key-responses",
        type=_count,
        metavar="N",
        help="the most responses each key may keep stored (default: 100000)",
    )
    v.add_argument(
        "--ctx",
        type=int,
        metavar="TOKENS",
        help="the context of a local model (default: its trained context, within memory, "
        "which a coding agent's first request needs: 32768 for the default model; lower "
        "takes less memory)",
    )
    v.add_argument(
        "--tool-format",
        metavar="FAMILY",
        help="the tool-call format: a family's name (toolwire families), none (tools in "
        "words) or auto (default: a local model's detected from its chat template); for an "
        "upstream, the family its model writes calls in as text, read as the reply streams",
    )
    # operating it: shutdown, logs, traces
    v.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM or Ctrl-C, how long streams in flight have to end before they are "
        "cut (no new connection is taken meanwhile; default: 30)",
    )
    v.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (warnings only, as ever) or json: one JSON object a line on stderr, one "
        "per request (method, path, status, duration, API, model, key name; never a body "
        "or a key) and the server's start and shutdown (default: text)",
    )
    v.add_argument(
        "--traces",
        action="store_true",
        help="OpenTelemetry traces, exported as the OTEL_* variables say (the otel extra; "
        "on by itself when $OTEL_EXPORTER_OTLP_ENDPOINT is set and the extra installed)",
    )
    v.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve from N processes, for more than one core (each learns on its own what "
        "it learns about models, and each loads a local model)",
    )
    v.set_defaults(run=_cmd_serve)
