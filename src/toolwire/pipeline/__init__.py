"""The reply pipeline: the one place that decides how a turn reaches a model and how its
reply becomes calls, for every transport (see :mod:`toolwire.pipeline.reply`)."""

from .memory import Lesson, ModelMemory, default_memory
from .reply import decide, in_words, plan_turn, planned, read, reply
from .request import Backend, Mode, OutputFormat, Plan, Prepared, Request, stream_sync
from .sampling import Sampling
from .transport import Transport

__all__ = [
    "Backend",
    "Lesson",
    "Mode",
    "ModelMemory",
    "OutputFormat",
    "Plan",
    "Prepared",
    "Request",
    "Sampling",
    "Transport",
    "decide",
    "default_memory",
    "in_words",
    "plan_turn",
    "planned",
    "read",
    "reply",
    "stream_sync",
]
