"""Inkling: typed blocks, each ``<|message_model|>[NAME]<|content_KIND|>…<|end_message|>``.

Hand-written, one of the named exceptions to families as declarations (:mod:`.syntax`): every
block's kind token says what it is (text, thinking, a JSON call, a raw-text invocation, an
error), so reading is a dispatch on typed blocks, not a call framing.

Every marker is one of the model's special tokens. The kind token says what the block is:

- ``<|content_text|>``: answer text;
- ``<|content_thinking|>``: reasoning;
- ``<|content_invoke_tool_json|>``: a call, one JSON object ``{"name": NAME, "args": {...}}``;
- ``<|content_invoke_tool_text|>``: a raw-text tool invocation. It names no tool and has no
  arguments (SGLang hands its body on as ``{"text": BODY}`` to a tool named ``""``; vLLM
  shows it as text). A call needs a tool, so its body stays text, with a ``call-not-read``
  notice saying why: nothing is invented;
- ``<|content_tool_error|>``: text.

The text between ``<|message_model|>`` and the kind token is the block's author (a call's
block names its tool there): metadata, never shown. The call's own ``name`` decides, as both
peers read it. A block ends at ``<|end_message|>`` or ``<|content_model_end_sampling|>`` (the
end of the turn). Blocks come in any order and number, so text may come before, between and
after calls. A reply may start inside a block's header (the prompt wrote
``<|message_model|>``) or with plain text; with ``reasoning_open`` it starts inside a
thinking block.

A call is read when its block ends, whole (both peers hold it until then too): the JSON must
be strict, an object with exactly ``name`` (non-empty) and ``args`` (an object). Unless
strict, ``arguments`` or ``parameters`` in place of ``args`` is read (``recovered-arguments-
key``, as vLLM reads them), and a call whose block the reply never closed is read when its JSON
is complete (``recovered-unclosed-tag``). Any other call block is not a call: its body stays
reply text with a ``call-not-read`` notice. Control tokens are never text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..events import ReasoningDelta
from ..messages import ToolCall
from .base import Family, ReplyStream
from .callshape import CallShape
from .grammar import CallForm, JsonCall, lit
from .jsoncall import raw_controls_notice, read_call_json
from .scan import Markers

__all__ = ["Inkling"]

MESSAGE_MODEL = "<|message_model|>"
TEXT = "<|content_text|>"
THINKING = "<|content_thinking|>"
INVOKE_JSON = "<|content_invoke_tool_json|>"
INVOKE_TEXT = "<|content_invoke_tool_text|>"
TOOL_ERROR = "<|content_tool_error|>"
END_MESSAGE = "<|end_message|>"
END_SAMPLING = "<|content_model_end_sampling|>"

#: Tokens that end a block.
_ENDS = frozenset({END_MESSAGE, END_SAMPLING, "<|endoftext|>"})
#: Every control token of the model's alphabet: none of them is ever reply text.
_CONTROL = (
    MESSAGE_MODEL,
    TEXT,
    THINKING,
    INVOKE_JSON,
    INVOKE_TEXT,
    TOOL_ERROR,
    *_ENDS,
    "<|message_user|>",
    "<|message_system|>",
    "<|message_tool|>",
    "<|content_image|>",
    "<|content_audio_input|>",
    "<|content_xml|>",
    "<|audio_end|>",
    "<|content_invoke_tool|>",
    "<|model_trigger_generation|>",
)
_TOKENS = Markers(_CONTROL)
#: A header longer than this is not a tool's name: it is given back as text.
_MAX_HEADER = 256

#: What a header the prompt opened may hold: one name (prose before a block is text).
_NAME = re.compile(r"\s*[\w.:\-]*\s*")

_SHAPE = CallShape(args_keys=("args",))
#: What vLLM also reads as a call's arguments; a named tolerance here.
_OTHER_ARGS = CallShape(args_keys=("arguments", "parameters"))

_TEXT, _HEADER, _THINK, _CALL, _RAW = range(5)
#: The block each kind token opens (anything else is text).
_KINDS = {THINKING: _THINK, INVOKE_JSON: _CALL, INVOKE_TEXT: _RAW}


class InklingStream(ReplyStream):
    """The blocks of one reply, read as their tokens arrive."""

    marker = INVOKE_JSON

    # Inkling's thinking is a block kind, not ``<think>``: the splitter is never opened.
    splitter_opens = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Unless thinking is open, the reply may start in the header the prompt opened.
        self._mode = _THINK if self.reasoning_open else _HEADER
        #: The header being read was opened by the prompt, not by a <|message_model|>.
        self._implicit = not self.reasoning_open
        self._pending = ""  # a partial control token, held until the next chunk decides
        self._header: list[str] = []
        self._header_len = 0
        self._body: list[str] = []  # a call block's text, read when the block ends

    # -- the grammar

    def _content(self, text: str) -> None:
        s = self._pending + text
        self._pending = ""
        i = 0
        n = len(s)
        while i < n:
            j, token = _TOKENS.scan(s, i)
            self._piece(s[i:j])
            if not token:
                self._pending = s[j:]
                return
            self._token(token)
            i = j + len(token)

    def _piece(self, text: str) -> None:
        """Text between control tokens, in the current block."""
        if not text:
            return
        mode = self._mode
        if mode == _THINK:
            self._out.append(ReasoningDelta(text))
        elif mode == _CALL:
            self._body.append(text)
        elif mode == _HEADER:
            self._header.append(text)
            self._header_len += len(text)
            if self._header_len > _MAX_HEADER:  # no name is this long: it was text
                self._text_header()
                self._mode = _TEXT
        else:
            self._text(text)

    def _token(self, token: str) -> None:
        mode = self._mode
        implicit, self._implicit = self._implicit, False
        if token == MESSAGE_MODEL:
            self._close_block(mode, ended=False)
            self._text_header()  # a header no kind followed was text after all
            self._mode = _HEADER
            return
        if mode == _HEADER and token not in _ENDS:
            if implicit and not _NAME.fullmatch("".join(self._header)):
                self._text_header()  # prose the reply opened with, not a name
            self._drop_header()
        if token in _KINDS or token in (TEXT, TOOL_ERROR):
            if mode not in (_HEADER, _TEXT):
                self._close_block(mode, ended=False)
            self._mode = _KINDS.get(token, _TEXT)
            if self._mode == _RAW:
                self._notice(
                    "call-not-read",
                    f"{INVOKE_TEXT} invokes no named tool with arguments; its text stays "
                    "reply text",
                )
            return
        if token in _ENDS:
            self._close_block(mode)
            self._text_header()
            self._mode = _TEXT
        # any other control token (another role's, a media kind) is dropped: never text

    def _text_header(self) -> None:
        self._text("".join(self._header))
        self._drop_header()

    def _drop_header(self) -> None:
        self._header.clear()
        self._header_len = 0

    def _close_block(self, mode: int, *, ended: bool = True) -> None:
        if mode == _CALL:
            body, self._body = "".join(self._body), []
            self._read_call(body, ended)

    # -- a call

    def _read_call(self, body: str, ended: bool) -> None:
        found = self._call_in(body)
        if isinstance(found, str):
            self._notice(
                "call-not-read",
                f"text after {INVOKE_JSON} is not a call ({found}); it stays reply text",
            )
            self._text(body)
            return
        if not ended:
            if self.strict:
                self._notice(
                    "call-not-read",
                    f"the call block after {INVOKE_JSON} was never closed; it stays reply text",
                )
                self._text(body)
                return
            self._notice(
                "recovered-unclosed-tag",
                f"read the call to {found[0]} although the reply ended before {END_MESSAGE}",
            )
        name, args = found
        index, cid = self._new_call(name)
        text = json.dumps(args, ensure_ascii=False)
        self._args(index, text)
        self._end(index, ToolCall(cid, name, args, text))

    def _call_in(self, body: str) -> tuple[str, dict[str, Any]] | str:
        """``(name, arguments)`` of the call in a block's body, or why it is none."""
        try:  # raw line breaks or tabs in its strings: read as their escapes, and said
            obj, raw = read_call_json(body.strip(), strict=self.strict)
        except (ValueError, RecursionError) as exc:
            return f"not valid JSON ({exc})"
        found = self._shape_of(obj)
        if raw and not isinstance(found, str):
            raw_controls_notice(self, found[0])
        return found

    def _shape_of(self, obj: Any) -> tuple[str, dict[str, Any]] | str:
        found = _SHAPE.read(obj, self.tools, strict=self.strict)
        if not isinstance(found, str) or self.strict or not isinstance(obj, dict):
            return found
        other = _OTHER_ARGS.read(obj, self.tools) if "args" not in obj else found
        if isinstance(other, str):
            return found
        key = next(k for k in _OTHER_ARGS.args_keys if k in obj)
        self._notice(
            "recovered-arguments-key",
            f'read the arguments of {other[0]} under "{key}", not "args"',
        )
        return other

    def _content_end(self) -> None:
        pending, self._pending = self._pending, ""
        self._piece(pending)  # a partial token at the very end was only text
        mode = self._mode
        if mode == _CALL:
            self._close_block(mode, ended=False)
        elif mode == _HEADER:
            self._text_header()
        self._mode = _TEXT


def _sample(name: str, args: Mapping[str, Any], index: int) -> str:
    """Some thinking, then the call's block, its author the tool."""
    call = json.dumps({"name": name, "args": args}, separators=(",", ":"))
    return (
        "<|message_model|><|content_thinking|>Writing it.<|end_message|>"
        f"<|message_model|>{name}<|content_invoke_tool_json|>" + call + "<|end_message|>"
    )


_INKLING_FORM = CallForm(
    JsonCall(args_key="args"),
    open=lit("<|content_invoke_tool_json|>"),
    close=f"({lit('<|end_message|>')})?",
    sep=f"{lit('<|message_model|>')} [^<]{{0,64}}",
    blocks=True,
    triggers=("<|content_invoke_tool_json|>",),
    prefix=f"{lit('<|message_model|>')} [^<\\n]{{0,64}}",
)


class Inkling(Family):
    name = "inkling"
    label = (
        "Inkling <|message_model|>NAME<|content_invoke_tool_json|>{...}<|end_message|> (Inkling)"
    )
    drops_tokens = True  # its control tokens are never text
    kept_tokens = ("<|message_model|>", "<|content_thinking|>", "<|end_message|>")
    samples = (_sample,)
    markers = (INVOKE_JSON,)
    stream_class = InklingStream
    grammar = _INKLING_FORM
