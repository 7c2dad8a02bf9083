"""``toolwire serve``: its arguments, the models it stands before (a config's, or the one
its flags name), and running it in one process or several."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from functools import partial
from typing import Any

from ..errors import UsageError
from .config import ModelEntry, Models, environment_key, read_config
from .guard import uvicorn_settings

__all__ = ["add_serve_command", "serve_app"]

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Where ``serve --workers N`` leaves its options for the worker processes (JSON).
_SERVE_ENV = "TOOLWIRE_SERVE"


def _gateway(args: argparse.Namespace) -> Any:
    """The gateway app ``serve`` runs, from its options (one place for one worker or many)."""
    from ..store import ConversationStore
    from . import create_app

    store = None if args.no_store else ConversationStore()
    app = create_app(_served_models(args), api_key=args.api_key, store=store)
    freeze_heap()
    return app


def freeze_heap() -> None:
    """What ``serve`` does to its process once the app is built: the objects made so far
    (the imports, the app, its models' Python side) leave the garbage collector's
    generations (:func:`gc.freeze`), so that a full collection later scans only what the
    requests in flight hold, not the whole process: measured under load, the slowest
    collections took 39 and 23 ms before (every reply in flight waiting), 3 ms after.
    (What is frozen is still freed when its last reference goes.)"""
    gc.collect()
    gc.freeze()


def serve_app() -> Any:
    """The gateway app of one ``serve --workers N`` process: uvicorn starts each worker from
    an import string, not an app, so each builds its own from the options ``serve`` left in
    ``$TOOLWIRE_SERVE``."""
    return _gateway(argparse.Namespace(**json.loads(os.environ[_SERVE_ENV])))


def _build_backend(
    entry: ModelEntry,
    *,
    timeout: float = 120.0,
    connect_timeout: float = 10.0,
    clients: dict[str, Any] | None = None,
) -> Any:
    """A backend for one served model: every model at one upstream shares one pool of
    connections (kept in ``clients`` by the upstream's URL) for as long as it serves, with
    the request deadline and connect timeout given; a local model is loaded now (the
    gateway calls this on first use)."""
    if entry.gguf is not None:
        from ..backends.llamacpp import LlamaCppBackend
        from ..cli import local_model

        return LlamaCppBackend(local_model(entry.gguf), n_ctx=entry.ctx)
    from ..backends import OpenAIBackend

    assert entry.upstream is not None and entry.upstream_model is not None
    return OpenAIBackend(
        entry.upstream_model,
        base_url=entry.upstream,
        api_key=environment_key(entry),
        dialect=entry.dialect,
        words=entry.words,
        client=_client_for(entry.upstream, clients, timeout, connect_timeout),
        timeout=timeout,
        connect_timeout=connect_timeout,
    )


def _client_for(
    upstream: str, clients: dict[str, Any] | None, timeout: float, connect_timeout: float
) -> Any:
    """The pooled client of ``upstream``: one per upstream, shared by its models."""
    from ..backends.http import new_client

    if clients is None:
        return new_client(timeout, connect_timeout=connect_timeout)
    key = upstream.rstrip("/")
    if key not in clients:
        clients[key] = new_client(timeout, connect_timeout=connect_timeout)
    return clients[key]


def _served_models(args: argparse.Namespace) -> Models:
    """The models ``serve`` stands before: a config's, or the one the flags name."""
    build = partial(
        _build_backend,
        timeout=args.upstream_timeout,
        connect_timeout=args.connect_timeout,
        clients={},
    )
    if args.config:
        if args.upstream or args.model or args.upstream_model:
            raise UsageError("--config lists the models; give no --model or --upstream with it")
        return Models(read_config(args.config), build)
    if args.upstream:
        entry = ModelEntry(
            args.upstream_model or "upstream",
            upstream=args.upstream,
            upstream_model=args.upstream_model or "-",
            api_key_env=None if args.upstream_key else "OPENAI_API_KEY",
            api_key=args.upstream_key,
        )
        if not args.upstream_model:
            return Models([], build, passed=entry)
    else:
        from ..cli import local_model

        path = local_model(args.model)
        entry = ModelEntry(path.stem, gguf=str(path), ctx=args.ctx)
    return Models.single(build(entry), entry.name)


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    if args.host not in _LOOPBACK and not args.api_key:
        raise UsageError(
            f"listening on {args.host} needs --api-key TOKEN (clients send it as "
            "a bearer token); on loopback it is optional"
        )
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.config:
        read_config(args.config)  # a bad config is told here, not by each worker
    # slow clients: deadlines for each request's headers and body (toolwire.server.guard)
    guarded = uvicorn_settings()
    where = f"http://{args.host}:{args.port}/v1"
    many = f" from {args.workers} processes" if args.workers > 1 else ""
    if args.workers == 1:
        app = _gateway(args)
        print(f"toolwire: serving at {where}{many}", file=sys.stderr)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", **guarded)
        return 0
    options = {k: v for k, v in vars(args).items() if not callable(v)}
    os.environ[_SERVE_ENV] = json.dumps(options)
    print(f"toolwire: serving at {where}{many}", file=sys.stderr)
    uvicorn.run(
        "toolwire.server.command:serve_app",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_level="warning",
        **guarded,
    )
    return 0


def _seconds(text: str) -> float:
    """A number of seconds above 0, for a timeout flag."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def add_serve_command(sub: Any, *, model_help: str) -> None:
    """Add ``serve`` to the command line's subcommands."""
    v = sub.add_parser("serve", help="an OpenAI-compatible gateway with working tool calls")
    v.add_argument("--model", help=f"to serve in-process: {model_help}")
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
    v.add_argument("--upstream-key", help="the upstream's key (default: $OPENAI_API_KEY)")
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
        "--no-store",
        action="store_true",
        help="keep no Responses conversations (previous_response_id, store: true)",
    )
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=int, default=8000)
    v.add_argument("--api-key", help="the bearer token clients must send (needed off loopback)")
    v.add_argument("--ctx", type=int, default=4096, help="context size of a local model")
    v.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve from N processes, for more than one core (each learns on its own what "
        "it learns about models, and each loads a local model)",
    )
    v.set_defaults(run=_cmd_serve)
