"""The reliability benchmark: how reliably a model and engine call tools."""

from .cases import Case, PromptSet, check_arguments, load_prompts
from .labbook import Labbook, Run, parse_labbook
from .report import write_report
from .run import Call, Outcome, Report, run_bench, summary

__all__ = [
    "Call",
    "Case",
    "Labbook",
    "Outcome",
    "PromptSet",
    "Report",
    "Run",
    "check_arguments",
    "load_prompts",
    "parse_labbook",
    "run_bench",
    "summary",
    "write_report",
]
