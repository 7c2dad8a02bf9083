"""``toolwire bench``: its arguments, and running it from the command line (the measuring
itself is :mod:`toolwire.bench.run`; the page, :mod:`toolwire.bench.report`). The model is
reached by the one backend factory, as ``chat`` and ``serve`` reach it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import MODEL_HELP, OLLAMA_HELP, OLLAMA_URL, backend_spec, print_json

#: ``--suite bfcl``'s bound on a reply's tokens: far above any case's calls, far below a
#: runaway's cost on a CPU.
BFCL_MAX_TOKENS = 1024
#: ``--suite bfcl``'s context for a local model: a multi-turn case offers up to 8,000
#: tokens of functions, then grows by its turns and results.
BFCL_CTX = 16384
#: ``--suite bfcl``'s seconds for one reply (BFCL itself sets none): a hung engine is still
#: caught, a 1,024-token reply after an 8,000-token prompt on a loaded CPU is not cut.
BFCL_TIMEOUT = 600.0

__all__ = ["add_bench"]


def add_bench(b: argparse.ArgumentParser) -> None:
    """``bench``, and ``bench report``."""
    b.add_argument("--base-url", help="an OpenAI-compatible server")
    b.add_argument("--model", help="the model's name at --base-url or Ollama")
    b.add_argument("--api-key")
    b.add_argument("--ollama", nargs="?", const=OLLAMA_URL, metavar="URL", help=OLLAMA_HELP)
    b.add_argument(
        "--local",
        nargs="?",
        const="",
        metavar="MODEL",
        help=f"in-process: {MODEL_HELP}",
    )
    b.add_argument("--words", action="store_true", help="give the tools in words")
    b.add_argument(
        "--engine",
        choices=("openai", "vllm", "llama-server", "generic"),
        help="the engine at --base-url: vllm and llama-server get a constrained pass",
    )
    b.add_argument("--prompts", help="another prompt set in the same format")
    b.add_argument(
        "--suite",
        choices=("prompts", "bfcl"),
        default="prompts",
        help="the 33-prompt quick check (default), or BFCL v4 (its single-turn categories "
        "unless --categories names others, such as multi_turn; needs: pip install --no-deps "
        "bfcl-eval==2026.3.23 mpmath==1.3.0)",
    )
    b.add_argument(
        "--categories",
        help="BFCL categories, comma-separated (default: every single-turn one; multi_turn "
        "names the four multi-turn ones)",
    )
    b.add_argument("--sample", type=int, help="BFCL: N cases of each category (default: all)")
    b.add_argument("--seed", type=int, default=0, help="BFCL: the sample's seed (0)")
    b.add_argument(
        "--engine-alone",
        action="store_true",
        help="BFCL: also ask the engine at --base-url (or Ollama) with nothing in front",
    )
    b.add_argument("--repeat", type=int, default=1)
    b.add_argument("--temperature", type=float)
    b.add_argument(
        "--max-tokens",
        type=int,
        help=f"the most tokens a reply takes (256; BFCL: {BFCL_MAX_TOKENS}, 0 for none)",
    )
    b.add_argument("--tool-choice", choices=("auto", "required", "none"), default="auto")
    b.add_argument("--no-think", action="store_true")
    b.add_argument(
        "--no-constrained",
        action="store_true",
        help="skip the second, constrained pass (in-process, and --engine vllm or llama-server)",
    )
    b.add_argument("--concurrency", type=int, default=1)
    b.add_argument(
        "--timeout",
        type=float,
        help=f"seconds a reply may take (120; BFCL: {BFCL_TIMEOUT:g}: a multi-turn case's "
        "first reply reads thousands of tokens of functions, slow on a busy CPU)",
    )
    b.add_argument("--json", action="store_true", help="the whole report as JSON")
    b.add_argument("--labbook", help="append one JSON line per run to this file")
    b.add_argument("--notes", help="free notes for the labbook")
    b.add_argument(
        "--ctx",
        type=int,
        help=f"a local model's context (4096; BFCL: {BFCL_CTX}, its multi-turn prompts "
        "offer thousands of tokens of functions)",
    )
    b.set_defaults(run=_cmd_bench)
    report = b.add_subparsers(title="more", metavar="report").add_parser(
        "report", help="draw a labbook's runs side by side as one HTML page, with PNGs beside it"
    )
    report.add_argument("labbook", help="a labbook written by --labbook")
    report.add_argument(
        "-o", "--output", help="the page to write (default: the labbook's name with .html)"
    )
    report.add_argument("--last", type=int, help="only the latest N runs")
    report.set_defaults(run=_cmd_bench_report)


def _cmd_bench(args: argparse.Namespace) -> int:
    import asyncio
    from dataclasses import replace

    from rich.progress import Progress

    from ..backends.factory import build_backend
    from ..bench import load_prompts, run_bench, summary
    from ..models import local_model

    if args.timeout is None:
        args.timeout = BFCL_TIMEOUT if args.suite == "bfcl" else 120.0
    spec = backend_spec(
        local=args.local,
        base_url=args.base_url,
        ollama=args.ollama,
        model=args.model,
        api_key=args.api_key,
        words=args.words,
        ctx=args.ctx or (BFCL_CTX if args.suite == "bfcl" else 4096),
    )
    if args.engine is not None:
        spec = replace(spec, engine=args.engine)
    if spec.kind == "local":  # the file, named in the report
        path = local_model(spec.model)
        spec = replace(spec, model=str(path))
        engine = f"llama-cpp-python in-process ({path.name})"
    else:
        engine = spec.where()
    backend = build_backend(spec)
    tokens = 256 if args.max_tokens is None else args.max_tokens
    options: dict[str, Any] = {"tool_choice": args.tool_choice, "max_tokens": tokens}
    if args.temperature is not None:
        options["temperature"] = args.temperature
    if args.no_think:
        options["think"] = False
    if args.suite == "bfcl":
        return _bfcl(args, backend, spec, engine, options)
    prompts = load_prompts(args.prompts)
    with Progress(transient=True, disable=args.json) as bar:
        task = bar.add_task("replies", total=len(prompts.cases) * args.repeat)
        report = asyncio.run(
            run_bench(
                backend,
                prompts,
                repeat=args.repeat,
                concurrency=args.concurrency,
                timeout=args.timeout,
                options=options,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                # a second pass where the engine can constrain (in-process); none elsewhere
                constrained=not args.no_constrained,
            )
        )
    result = report.to_json()
    if args.labbook:
        entry = {
            **result,
            "model": args.model or engine,
            "engine": engine,
            "base_url": args.base_url or spec.base_url,
            "temperature": args.temperature,
            "tool_choice": args.tool_choice,
            "thinking": not args.no_think,
            "repeat": args.repeat,
        }
        _append(args, entry)
    if args.json:
        print_json(result)
    else:
        print(summary(report))
    return 0


def _append(args: argparse.Namespace, entry: dict[str, Any]) -> None:
    """One run's line at the end of ``--labbook``, dated, with ``--notes``."""
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(args.labbook, "a", encoding="utf-8") as book:
        line = {**entry, "date": now, "notes": args.notes or ""}
        book.write(json.dumps(line, ensure_ascii=False) + "\n")


def _bfcl(
    args: argparse.Namespace, backend: Any, spec: Any, engine: str, options: dict[str, Any]
) -> int:
    """``bench --suite bfcl``: BFCL's cases through toolwire (:mod:`toolwire.bench.bfcl_run`)."""
    import asyncio

    from rich.progress import Progress

    from ..bench.bfcl_data import CATEGORIES, bfcl_version, sample
    from ..bench.bfcl_run import engine_alone, run_bfcl, summary
    from ..errors import UsageError

    if args.tool_choice != "auto" or args.repeat != 1 or args.prompts:
        raise UsageError(
            "--suite bfcl asks each case as BFCL does: no --tool-choice, --repeat or --prompts"
        )
    names = args.categories.split(",") if args.categories else list(CATEGORIES)
    cases = sample([n.strip() for n in names if n.strip()], args.sample, args.seed)
    # as BFCL asks: temperature 0.001 unless given; a reply bounded (BFCL sets none, but a
    # small model that runs away on a CPU costs minutes a case): 0 is no bound
    options = {"temperature": 0.001 if args.temperature is None else args.temperature}
    tokens = BFCL_MAX_TOKENS if args.max_tokens is None else args.max_tokens
    if tokens > 0:
        options["max_tokens"] = tokens
    if args.no_think:
        options["think"] = False
    alone = None
    if args.engine_alone:
        if spec.kind == "local" or not spec.base_url:
            raise UsageError("--engine-alone needs --base-url (or --ollama): an engine to ask")
        base = spec.base_url if spec.kind == "openai" else spec.base_url.rstrip("/") + "/v1"
        alone = engine_alone(
            base, spec.model or "", api_key=spec.api_key, options=options, timeout=args.timeout
        )
    with Progress(transient=True, disable=args.json) as bar:
        task = bar.add_task("replies", total=len(cases))
        report = asyncio.run(
            run_bfcl(
                backend,
                cases,
                concurrency=args.concurrency,
                timeout=args.timeout,
                options=options,
                constrained=not args.no_constrained,
                alone=alone,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
        )
    result = {
        **report.to_json(),
        "bfcl_eval": bfcl_version(),
        "sample": args.sample,
        "seed": args.seed,
        "options": options,
        "engine": engine,
        "model": args.model or engine,
    }
    if args.labbook:  # the figures and the cases toolwire changed; every case's in --json
        changed = {
            f"{column}-{against}": [(o.case.id, now) for o, now in report.changed(column, against)]
            for column, against in (("recovered", "sent"), ("recovered", "alone"))
        }
        entry = {
            **{k: v for k, v in result.items() if k != "outcomes"},
            "changed": changed,
        }
        _append(args, entry)
    if args.json:
        print_json(result)
    else:
        print(summary(report))
        per_minute = len(cases) / max(sum(report.seconds.values()), 1e-9) * 60
        print(f"  {per_minute:.1f} cases a minute ({', '.join(report.columns)})")
    return 0


def _cmd_bench_report(args: argparse.Namespace) -> int:
    """The labbook's runs on one page; its BFCL runs on a page of their own beside it."""
    from ..bench.bfcl_report import parse_bfcl, write_bfcl_report
    from ..bench.labbook import MAX_LABBOOK_BYTES
    from ..bench.report import write_report
    from ..errors import LabbookError

    out = Path(args.output or str(Path(args.labbook).with_suffix(".html")))
    try:
        with open(args.labbook, "rb") as f:
            bfcl = parse_bfcl(f.read(MAX_LABBOOK_BYTES + 1))
    except OSError as exc:
        raise LabbookError(f"cannot read the labbook {args.labbook}: {exc.strerror}") from None
    if args.last:
        bfcl = bfcl[-args.last :]
    try:
        files = write_report(args.labbook, out, last=args.last)
    except LabbookError:
        if not bfcl:
            raise
    else:
        for n, why in files.labbook.skipped:
            if "a BFCL run" not in why:
                print(f"toolwire: line {n} of {args.labbook} not read: {why}", file=sys.stderr)
        print(f"{len(files.shown)} runs drawn: {files.html}")
        for png in files.pngs:
            print(f"  {png}")
    if bfcl:
        page = out.with_name(f"{out.stem}-bfcl.html")
        pngs = write_bfcl_report(bfcl, page, Path(args.labbook).name)
        print(f"{len(bfcl)} BFCL runs drawn: {page}")
        for png in pngs:
            print(f"  {png}")
    return 0
