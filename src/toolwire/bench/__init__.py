"""The reliability benchmark: how reliably a model and engine call tools."""

from .cases import Case, PromptSet, check_arguments, load_prompts
from .run import Outcome, Report, run_bench, summary

__all__ = [
    "Case",
    "Outcome",
    "PromptSet",
    "Report",
    "check_arguments",
    "load_prompts",
    "run_bench",
    "summary",
]
