"""The families that write a marker, then a JSON list of call objects, then maybe an end marker.

(Granite 3.3, Nemotron Nano v2 and Firefunction v2 are declared as syntax values now:
:mod:`.declared`.)

One grammar, each family's differences as data (:class:`ListGrammar`):

- Apriel 1.5/1.6: ``<tool_calls>[{"name": NAME, "arguments": {...}}, ...]</tool_calls>``
- Apertus: ``<|tools_prefix|>[{NAME: {...}}, ...]<|tools_suffix|>``
- Command R7B / Cohere2: ``<|START_ACTION|>[{"tool_call_id": "0", "tool_name": NAME,
  "parameters": {...}}, ...]<|END_ACTION|>``

Text may come before the marker. Each call is announced as soon as its name is read and its
argument text passed on as written; the list must hold at least one call, every item must be
a call in the family's shape, and a family with an end marker must write it after the list.
Anything else is reply text, with a ``call-not-read`` notice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .base import Family
from .callshape import CallShape
from .grammar import JsonCall
from .grammar_forms import json_list
from .listcalls import JsonListStream, ListGrammar
from .reasoning import ReasoningTags
from .samples import Sample

__all__ = ["Apertus", "Apriel", "CommandR7B"]


#: Apriel's templates add the call's ``id`` to each item, after the arguments. A call is
#: announced at its name (its arguments stream), so the model's id is kept only when it comes
#: before the name; one written after it does not change the id announced.
APRIEL = ListGrammar("<tool_calls>", CallShape(id_key="id"), "</tool_calls>")
APERTUS = ListGrammar("<|tools_prefix|>", CallShape(name_is_key=True), "<|tools_suffix|>")
#: ``tool_call_id`` is written first, so the call is announced with the model's id.
COMMAND_R7B = ListGrammar(
    "<|START_ACTION|>",
    CallShape(name_key="tool_name", args_keys=("parameters",), id_key="tool_call_id"),
    "<|END_ACTION|>",
)


class AprielStream(JsonListStream):
    grammar = APRIEL


class ApertusStream(JsonListStream):
    grammar = APERTUS


class CommandR7BStream(JsonListStream):
    grammar = COMMAND_R7B


def _named(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def _list_sample(
    opening: str,
    closing: str = "",
    item: Callable[[str, Mapping[str, Any]], dict[str, Any]] = _named,
) -> Sample:
    """A writer of one call as a list of one item between ``opening`` and ``closing``."""

    def sample(name: str, args: Mapping[str, Any], index: int) -> str:
        return opening + json.dumps([item(name, args)]) + closing

    return sample


_APRIEL_FORM = json_list("<tool_calls>", JsonCall(id_key="id"), "</tool_calls>")

_APERTUS_FORM = json_list("<|tools_prefix|>", JsonCall(name_is_key=True), "<|tools_suffix|>")

_COHERE = JsonCall("tool_name", "parameters", id_key="tool_call_id", id_first=True)

_COMMAND_R7B_FORM = json_list("<|START_ACTION|>", _COHERE, "<|END_ACTION|>")


class Apriel(Family):
    name = "apriel"
    label = "Apriel <tool_calls>[...]</tool_calls> (Apriel 1.5, 1.6)"
    reasoning = ReasoningTags(
        # Apriel 1.6's prompt ends with this line; its answer follows the closer
        prompt_blocks={"Here are my reasoning steps:": "[BEGIN FINAL RESPONSE]"},
        answer_after={"[BEGIN FINAL RESPONSE]": "[END FINAL RESPONSE]"},
        # Hunyuan A13B (read as this family): <think>…</think> then <answer>…</answer>
        blocks={"<think>": "</think>"},
        answers={"<answer>": "</answer>"},
    )
    kept_tokens = ("</tool_calls>",)
    samples = (_list_sample("<tool_calls>", "</tool_calls>"),)
    markers = (APRIEL.marker,)
    stream_class = AprielStream
    grammar = _APRIEL_FORM


class Apertus(Family):
    name = "apertus"
    label = 'Apertus <|tools_prefix|>[{"NAME": {...}}]<|tools_suffix|> (Apertus)'
    kept_tokens = ("<|tools_suffix|>",)
    samples = (_list_sample("<|tools_prefix|>", "<|tools_suffix|>", lambda n, a: {n: a}),)
    markers = (APERTUS.marker,)
    stream_class = ApertusStream
    grammar = _APERTUS_FORM


class CommandR7B(Family):
    name = "command-r7b"
    label = "Cohere <|START_ACTION|>[...]<|END_ACTION|> (Command R7B, Cohere2)"
    reasoning = ReasoningTags(
        blocks={"<|START_THINKING|>": "<|END_THINKING|>"},
        answers={"<|START_RESPONSE|>": "<|END_RESPONSE|>", "<|START_TEXT|>": "<|END_TEXT|>"},
    )
    end_tokens = ("<|END_OF_TURN_TOKEN|>",)
    kept_tokens = ("<|END_ACTION|>",)
    samples = (
        _list_sample(
            "<|START_ACTION|>",
            "<|END_ACTION|>",
            lambda n, a: {"tool_call_id": "0", "tool_name": n, "parameters": a},
        ),
    )
    markers = (COMMAND_R7B.marker,)
    stream_class = CommandR7BStream
    grammar = _COMMAND_R7B_FORM
