"""``toolwire models``: the known models, whether each is here, and how each did on the bench.

A listing answers "what can I run, and which is worth it?" without waiting: whether a model
is installed comes from :meth:`BundledModel.status`, which reads no model bytes, and how
well it calls tools comes from the latest run of it in a bench labbook (the file
``toolwire bench --labbook FILE`` appends to), read with the bench's own labbook reader.
A model no run names is "not measured": no figure is made up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import models as _models
from .bench.labbook import MAX_LABBOOK_BYTES, RATES, Run, parse_labbook
from .errors import LabbookError
from .models import KnownModel

__all__ = ["latest_runs", "list_models", "models_text", "read_labbook_runs"]

_MB = 1_000_000


def read_labbook_runs(path: str | Path) -> list[Run]:
    """Every run in a labbook, in the order written; lines that are not runs are passed over
    (``toolwire bench report`` names them). Raises :class:`LabbookError` when the file
    cannot be read or is too large."""
    try:
        with open(path, "rb") as book:
            data = book.read(MAX_LABBOOK_BYTES + 1)
    except OSError as exc:
        raise LabbookError(f"cannot read the labbook {path}: {exc.strerror}") from None
    return parse_labbook(data).runs


def _names_of(run: Run) -> set[str]:
    """The names a run goes by: its model and engine as written, the file named in
    parentheses (``llama-cpp-python in-process (FILE)``) and the last part of a path."""
    names = set()
    for text in (run.model, run.engine):
        text = text.strip()
        if text.endswith(")") and "(" in text:
            names.add(text[text.rindex("(") + 1 : -1])
        names.add(text)
    names |= {n.rstrip("/").rsplit("/", 1)[-1] for n in names}
    return {n.lower() for n in names if n}


def _keys(model: KnownModel) -> set[str]:
    filename = model.bundled.filename
    return {model.name, filename.lower(), filename.lower().removesuffix(".gguf")}


def latest_runs(runs: list[Run]) -> dict[str, Run]:
    """The last run written of each known model, by name. A run counts for a model when its
    model or engine is the model's name or file (with or without ``.gguf``, alone or at the
    end of a path), as ``toolwire bench --local NAME`` records it."""
    latest: dict[str, Run] = {}
    for run in runs:
        names = _names_of(run)
        for model in _models.KNOWN_MODELS:
            if names & _keys(model):
                latest[model.name] = run
    return latest


def _bench_json(run: Run) -> dict[str, Any]:
    return {
        "labbook_line": run.line,
        "date": run.date or None,
        "model": run.model,
        "engine": run.engine,
        "replies": run.replies,
        "rates": run.rates,
        "recovered_rates": run.recovered_rates,
        "constrained_rates": run.constrained_rates,
    }


def list_models(*, labbook: str | Path | None = None, verify: bool = False) -> list[dict[str, Any]]:
    """The known models as JSON-ready records, the default first.

    ``verify`` checks each installed model's bytes first (assembling it if needed), which
    takes seconds per model; otherwise nothing is hashed. ``labbook`` adds each model's
    latest bench run (``bench`` is None when it has none).
    """
    runs = latest_runs(read_labbook_runs(labbook)) if labbook is not None else {}
    out = []
    for model in _models.KNOWN_MODELS:
        status = model.bundled.status()
        if verify and status.state == "installed":
            model.bundled.path()  # raises ModelNotFoundError, naming the fix, if the bytes are bad
            status = model.bundled.status()
        run = runs.get(model.name)
        out.append(
            {
                "name": model.name,
                "default": model.name == _models.DEFAULT_MODEL,
                "about": model.about,
                "file": model.bundled.filename,
                "size": model.bundled.size,
                "size_mb": round(model.bundled.size / _MB),
                "installed": status.state != "missing",
                "verified": status.state == "verified",
                "path": str(status.path) if status.path else None,
                "install": model.bundled.install,
                "bench": _bench_json(run) if run is not None else None,
            }
        )
    return out


_STATES = {
    (True, True): "installed, verified",
    (True, False): "installed, not verified yet (the first use checks it)",
    (False, False): "not installed",
}


def _rates_text(rates: dict[str, float | None]) -> str:
    shown = (f"{RATES[k]} {'n/a' if v is None else f'{v:.0%}'}" for k, v in rates.items())
    return ", ".join(shown)


def models_text(models: list[dict[str, Any]], *, labbook: str | Path | None = None) -> str:
    """What ``toolwire models`` prints: a few lines per model from :func:`list_models`."""
    lines = []
    for m in models:
        lines.append(m["name"] + (" (default)" if m["default"] else ""))
        lines.append(f"  {m['about']}")
        state = _STATES[(m["installed"], m["verified"])]
        lines.append(f"  {m['size']:,} bytes ({m['size_mb']:,} MB), {state}")
        lines.append(f"  install: {m['install']}")
        bench = m["bench"]
        if bench is None:
            why = "" if labbook is not None else " (give --labbook FILE to read bench runs)"
            lines.append(f"  bench: not measured{why}")
            continue
        when = f", {bench['date']}" if bench["date"] else ""
        lines.append(
            f"  bench (labbook line {bench['labbook_line']}{when}): {_rates_text(bench['rates'])}"
        )
        if bench["recovered_rates"]:
            lines.append(f"    after recovery: {_rates_text(bench['recovered_rates'])}")
        if bench["constrained_rates"]:
            lines.append(f"    constrained: {_rates_text(bench['constrained_rates'])}")
    return "\n".join(lines)
