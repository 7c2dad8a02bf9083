"""``toolwire detect``, ``doctor`` and ``render``: what a chat template teaches, whether tool
calls go through it and back, and the prompt it makes of a conversation."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import TEMPLATE_HELP, print_json, read_messages, read_tools, template_of

__all__ = ["add_detect", "add_doctor", "add_render"]


def add_detect(d: argparse.ArgumentParser) -> None:
    d.add_argument("path", nargs="?", help=TEMPLATE_HELP)
    d.add_argument("--json", action="store_true", help="details as JSON after the first line")
    d.set_defaults(run=_cmd_detect)


def add_doctor(o: argparse.ArgumentParser) -> None:
    o.add_argument("path", nargs="?", help=TEMPLATE_HELP)
    o.add_argument("--json", action="store_true", help="the checks as JSON")
    o.set_defaults(run=_cmd_doctor)


def add_render(r: argparse.ArgumentParser) -> None:
    r.add_argument("path", nargs="?", help=TEMPLATE_HELP)
    r.add_argument("--messages", required=True, help="JSON file with the messages ('-': stdin)")
    r.add_argument("--tools", help="JSON file with the tools")
    r.add_argument("--no-generation-prompt", action="store_true")
    think = r.add_mutually_exclusive_group()
    think.add_argument(
        "--enable-thinking", dest="enable_thinking", action="store_true", default=None
    )
    think.add_argument("--disable-thinking", dest="enable_thinking", action="store_false")
    r.add_argument(
        "--call-ids",
        choices=("keep", "alnum9", "functions"),
        help="how call ids reach the template (default: what the format needs)",
    )
    r.set_defaults(run=_cmd_render)


def _cmd_detect(args: argparse.Namespace) -> int:
    from ..formats.detect import detect_format

    template, source = template_of(args.path)
    found = detect_format(template)
    print(found.format)
    if args.json:
        family = found.family
        print(
            json.dumps(
                {
                    "format": found.format,
                    "via": found.via,
                    "label": family.label if family else "no tool-call format found",
                    "shape": found.shape.to_json() if found.shape else None,
                    "source": source,
                    "template": template.name,
                    "sha256": template.sha256,
                    "reasoning_open": found.reasoning_open,
                    "call_text": found.call_text,
                    "candidates": list(found.candidates),
                    "errors": list(found.errors),
                },
                ensure_ascii=False,
                indent=2,
            )
        )
    return 0


#: How ``doctor`` marks a check: held, failed, or failed but only advice; in ASCII for a
#: terminal that cannot show the marks.
_MARKS = {"ok": "✓", "fail": "✗", "advice": "!"}
_ASCII_MARKS = {"ok": "ok", "fail": "FAIL", "advice": "warn"}


def _doctor_lines(source: str, report: Any, marks: dict[str, str]) -> str:
    lines = [f"{source} (template {report.template})"]
    for check in report.checks:
        state = "ok" if check.ok else "fail" if check.required else "advice"
        message = " ".join(check.message.splitlines())  # one check, one line
        lines.append(f"{marks[state]} {check.name}: {message}")
    lines.append(report.verdict)
    return "\n".join(lines)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from ..doctor import diagnose

    template, source = template_of(args.path)
    report = diagnose(template)
    if args.json:
        print_json({"source": source, **report.to_json()})
    else:
        try:
            print(_doctor_lines(source, report, _MARKS))
        except UnicodeEncodeError:
            text = _doctor_lines(source, report, _ASCII_MARKS)
            print(text.encode("ascii", "backslashreplace").decode())
    return 0 if report.ok else 1


def _cmd_render(args: argparse.Namespace) -> int:
    from ..backends.prompt import TemplateTransport
    from ..pipeline import Request
    from ..templates import TemplateBudget

    template, _ = template_of(args.path)
    budget = TemplateBudget()  # one for the command: detection's renders and the prompt's
    # the local engine's own planning and rendering: the prompt printed is the one it sends
    transport = TemplateTransport(template, budget=budget)
    request = Request(
        read_messages(args.messages), read_tools(args.tools), think=args.enable_thinking
    )
    prompt = transport.planned_prompt(
        request,
        add_generation_prompt=not args.no_generation_prompt,
        call_ids=args.call_ids,
        budget=budget,
    )
    sys.stdout.write(prompt)
    if not prompt.endswith("\n"):
        sys.stdout.write("\n")
    return 0
