"""``toolwire models``: the models known by name, whether each is installed, and how each
did on the bench (the listing is :mod:`toolwire.catalog`)."""

from __future__ import annotations

import argparse

from .common import print_json

__all__ = ["add_models"]


def add_models(m: argparse.ArgumentParser) -> None:
    m.add_argument("--json", action="store_true", help="the list as JSON")
    m.add_argument(
        "--labbook", metavar="FILE", help="a labbook bench --labbook wrote: each model's last run"
    )
    m.add_argument("--verify", action="store_true", help="check installed models' bytes first")
    m.set_defaults(run=_cmd_models)


def _cmd_models(args: argparse.Namespace) -> int:
    from ..catalog import list_models, models_text

    models = list_models(labbook=args.labbook, verify=args.verify)
    if args.json:
        print_json(models)
    else:
        print(models_text(models, labbook=args.labbook))
    return 0
