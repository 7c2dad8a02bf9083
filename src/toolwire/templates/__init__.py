"""Sandboxed rendering of a model's own chat template, with tools.

* :class:`ChatTemplate` renders a Hugging Face / GGUF Jinja chat template in a sandbox.
* :func:`load_template` reads one from a ``.jinja`` file or a GGUF model.
* :func:`read_gguf` reads a GGUF file's template and special tokens (:class:`GGUFInfo`).
* :class:`TemplateBudget` is the time, loop steps and memory one operation's renders share.
* :func:`shape_messages` and :func:`normalize_tools` put OpenAI-style messages and tools in
  the shape every published template accepts (``render`` applies both).

Limits on template size, output size and value sizes are constants in
:mod:`toolwire.templates.sandbox`; the default budget's are in :mod:`toolwire.templates.budget`.


Each name is imported on first use (PEP 562): a module that needs only the shaping of
messages (the call ids every family writes) does not load Jinja.
"""

from __future__ import annotations

import typing as _typing

from toolwire.lazy import lazy_names

if _typing.TYPE_CHECKING:
    from toolwire.templates.budget import TemplateBudget
    from toolwire.templates.chat import ChatTemplate
    from toolwire.templates.gguf import GGUFInfo, read_gguf
    from toolwire.templates.load import load_template
    from toolwire.templates.shaping import normalize_tools, shape_messages

_HOMES = {
    "ChatTemplate": "chat",
    "GGUFInfo": "gguf",
    "TemplateBudget": "budget",
    "load_template": "load",
    "normalize_tools": "shaping",
    "read_gguf": "gguf",
    "shape_messages": "shaping",
}

__all__ = [
    "ChatTemplate",
    "GGUFInfo",
    "TemplateBudget",
    "load_template",
    "normalize_tools",
    "read_gguf",
    "shape_messages",
]

__getattr__ = lazy_names(__name__, _HOMES)
