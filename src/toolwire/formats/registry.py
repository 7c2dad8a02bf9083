"""The families by name, in detection order, and the ``tool_format`` setting.

This is the one place that gathers what the families declare (``Family`` class attributes in
each family's module, formats/base.py): the thinking tags every stream recognises (installed
in formats/reasoning.py when the package is imported), the end-of-turn tokens detection cuts
at, the special tokens calls need kept. Adding a family is its module, its line here and its
tests.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError
from . import reasoning
from .base import Family
from .declared import (
    APERTUS,
    APRIEL,
    COMMAND_R7B,
    COMMAND_R_PLUS,
    DEEPSEEK_DSML,
    DEEPSEEK_R1,
    DEEPSEEK_V31,
    DOTS,
    FIREFUNCTION,
    FUNCTION_GEMMA,
    FUNCTIONARY_V31,
    FUNCTIONARY_V32,
    GEMMA4,
    GIGACHAT,
    GIGACHAT_GCML,
    GLM,
    GRANITE,
    GRANITE_20B,
    HERMES,
    HUNYUAN,
    INTERNLM2,
    INVOKE_XML,
    IQUEST,
    K2V3_IFM,
    KIMI_K2,
    LFM2,
    LLAMA3,
    LONGCAT,
    MINICPM3,
    MINICPM5,
    MINIMAX,
    MINIMAX_M1,
    MINIMAX_M3,
    MISTRAL,
    NEMOTRON_V2,
    OLMO3,
    OPENPANGU,
    PLAMO3,
    PYTHONIC,
    QWEN25_CODER,
    QWEN_XML,
    RWKV,
    SEED_OSS,
    SOLAR_OPEN,
    SOLAR_OPEN2,
    STEP3,
    STEP_AUDIO2,
    TAGGED_HARMONY,
    TAGGED_PYTHONIC,
    TELECHAT4,
    XLAM,
)
from .glimmer import Glimmer
from .harmony import GptOss
from .inkling import Inkling
from .kimi_k3 import KimiK3

__all__ = [
    "FORMAT_SETTINGS",
    "describe_families",
    "end_tokens",
    "families",
    "family_names",
    "get_family",
    "kept_tokens",
    "reasoning_tags",
]

_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        QWEN_XML.family,
        HERMES.family,
        LLAMA3.family,
        MISTRAL.family,
        DEEPSEEK_R1.family,
        DEEPSEEK_V31.family,
        DEEPSEEK_DSML.family,
        GIGACHAT_GCML.family,
        GLM.family,
        KIMI_K2.family,
        MINIMAX.family,
        GRANITE.family,
        NEMOTRON_V2.family,
        APRIEL.family,
        APERTUS.family,
        FIREFUNCTION.family,
        COMMAND_R7B.family,
        SEED_OSS.family,
        MINICPM5.family,
        MINIMAX_M3.family,
        LFM2.family,
        MINICPM3.family,
        GEMMA4.family,
        PYTHONIC.family,
        FUNCTIONARY_V31.family,
        FUNCTIONARY_V32.family,
        GIGACHAT.family,
        COMMAND_R_PLUS.family,
        MINIMAX_M1.family,
        SOLAR_OPEN.family,
        GptOss(),
        Glimmer(),
        KimiK3(),
        Inkling(),
        HUNYUAN.family,
        INTERNLM2.family,
        LONGCAT.family,
        STEP3.family,
        FUNCTION_GEMMA.family,
        OLMO3.family,
        TAGGED_PYTHONIC.family,
        TAGGED_HARMONY.family,
        INVOKE_XML.family,
        K2V3_IFM.family,
        XLAM.family,
        DOTS.family,
        IQUEST.family,
        TELECHAT4.family,
        PLAMO3.family,
        SOLAR_OPEN2.family,
        GRANITE_20B.family,
        QWEN25_CODER.family,
        STEP_AUDIO2.family,
        OPENPANGU.family,
        RWKV.family,
    )
}

#: Values the ``tool_format`` setting takes besides a family name.
FORMAT_SETTINGS = ("auto", "none")


def family_names() -> list[str]:
    """Every family's name, in detection order."""
    return list(_FAMILIES)


def get_family(name: str) -> Family:
    """The family called ``name``; :class:`~toolwire.errors.FormatError` for an unknown one."""
    try:
        return _FAMILIES[name]
    except KeyError:
        known = ", ".join([*FORMAT_SETTINGS, *_FAMILIES])
        raise FormatError(f"unknown tool format {name!r}; known: {known}") from None


def families() -> list[Family]:
    """Every family, in detection order."""
    return list(_FAMILIES.values())


def reasoning_tags() -> reasoning.ReasoningTags:
    """Every family's thinking and answer tags together, in detection order."""
    tags = reasoning.ReasoningTags()
    for family in _FAMILIES.values():
        tags |= family.reasoning
    return tags


def end_tokens() -> tuple[str, ...]:
    """Every family's end-of-turn token texts, each once, in detection order."""
    return tuple(dict.fromkeys(t for family in _FAMILIES.values() for t in family.end_tokens))


def kept_tokens() -> tuple[str, ...]:
    """The tokens any family's calls need kept when generating (markers and declared)."""
    return tuple(dict.fromkeys(t for f in _FAMILIES.values() for t in f.special_tokens))


def describe_families() -> list[dict[str, Any]]:
    """What each family declares, for ``toolwire families`` and the README's table: its
    name, the models (its label), the texts that open its calls, its thinking tags, and
    whether its calls can be constrained (a ``grammar`` it declares)."""
    return [
        {
            "name": f.name,
            "models": f.models,
            "markers": list(f.markers),
            "thinking": f.reasoning.describe(),
            "constrained": getattr(f, "grammar", None) is not None,
        }
        for f in _FAMILIES.values()
    ]


reasoning.install(reasoning_tags())
