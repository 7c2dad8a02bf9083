"""DeepSeek V3.2 and V4 "DSML": calls as ``<｜DSML｜invoke>`` blocks with typed parameters;
and GigaChat 3.5 "GCML", the same grammar under the prefix ``<｜GCML｜``.

In full (V3.2 writes ``function_calls``, V4 ``tool_calls``; the closer matches the opener)::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="P" string="true">text</｜DSML｜parameter>
    <｜DSML｜parameter name="Q" string="false">JSON</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

A ``string="true"`` value is the text between the tags, exactly; a ``string="false"`` value is
JSON, decoded here because the grammar says so (strictly: a value that is not JSON breaks the
call). The call's arguments are that mapping and its argument text is the mapping's JSON,
streamed as it grows; typing by the tool's schema still happens once, in the argument
pipeline. ``<｜DSML｜`` is the marker: any DSML text that is not a complete block stays text.

Two shapes the templates never write but the models do (SGLang reads both), each read unless
strict and named in a notice: an invoke closed in its own tag, ``<｜DSML｜invoke name="x"/>``
(a call with no arguments: ``recovered-self-closing``), and an invoke whose body is one JSON
object of the arguments instead of parameter elements (``recovered-json-arguments``), its
text passed on as written while it streams. Parameters and a JSON body never mix in one invoke.

V4 also damages its calls block's tag (SGLang reads past it): ``<｜DSML｜toolcalls>``, a tag
that lost its ``>``, a stray ``<｜DSML｜ word>`` line. Unless strict, a line after the marker
that is no DSML tag is read past when a call follows it (a calls block or an invoke), named
``recovered-misspelt-tag``; with no call after it, it is text. An invoke with no calls block
around it is read when it names a declared tool (``recovered-section-missing``): nothing else
confirms it; after a calls block that broke, no invoke is read bare (it was that block's).
DSML inside a ``` or ~~~ code fence is markup quoted in prose, never a call; it stays text
with no notice.

GigaChat 3.5 writes ``<｜GCML｜tool_calls>`` … ``</｜GCML｜tool_calls>`` with ``<｜GCML｜invoke>``
and ``<｜GCML｜parameter>`` inside, laid out as V4's block (its template joins invokes and
parameters with line breaks). It is a family of its own, ``gigachat-gcml`` (its models, its
marker, its end token ``</s>``), read by the same body with that prefix's literals: every
tolerance and every strict refusal above holds for it alike, only ``tool_calls`` opens its
block, and a block opened with one prefix is never closed with the other's tags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..events import NoticeCode
from ..messages import ToolCall
from .base import Family, loads_json
from .grammar import AnyOf, CallForm, Tagged, lit
from .jsonscan import ObjectScanner
from .markerstream import DONE, OPEN, WS, Body, MarkerStream, expect_any
from .reasoning import THINK
from .samples import Sample
from .scan import Markers, markers
from .textargs import LOOSE_NAME_BREAKS, NameReader

__all__ = ["DeepSeekDsml", "GigaChatGcml"]


@dataclass(frozen=True)
class _Tags:
    """The literals of one prefix's grammar: DeepSeek writes ``<｜DSML｜``, GigaChat 3.5
    ``<｜GCML｜``, and a block opened with one is read in that one only (no mixing)."""

    word: str  # DSML or GCML, for the reasons a body gives
    marker: str
    blocks: dict[str, str]  # the calls block's tag after the marker → its closer
    invoke: str
    end_invoke: str
    parameter: str
    end_parameter: str
    value_end: Markers
    bare_invoke: str  # an invoke with no calls block around it, right after the marker


def _tags(word: str, blocks: tuple[str, ...]) -> _Tags:
    marker = f"<｜{word}｜"
    invoke = f'{marker}invoke name="'
    end_parameter = f"</｜{word}｜parameter>"
    return _Tags(
        word=word,
        marker=marker,
        blocks={f"{b}>": f"</｜{word}｜{b}>" for b in blocks},
        invoke=invoke,
        end_invoke=f"</｜{word}｜invoke>",
        parameter=f'{marker}parameter name="',
        end_parameter=end_parameter,
        value_end=Markers((end_parameter,)),
        bare_invoke=invoke[len(marker) :],
    )


#: V3.2 writes ``function_calls``, V4 ``tool_calls``.
_DSML_TAGS = _tags("DSML", ("function_calls", "tool_calls"))
#: GigaChat 3.5 writes only ``tool_calls``.
_GCML_TAGS = _tags("GCML", ("tool_calls",))
_DSML = _DSML_TAGS.marker
_GCML = _GCML_TAGS.marker
_STRING = '" string="'
_KINDS = ('true">', 'false">')
_NAME_END = '">'
#: An invoke closed in its own tag: a call with no arguments (not the templates' shape).
_SELF_CLOSED = '"/>'

#: A damaged tag after the marker runs to the end of its line, at most this long.
_MAX_DAMAGED = 200
#: The lines that open and close a code fence: markup quoted inside one is prose.
_FENCES = ("```", "~~~")

(
    _BLOCK,
    _NEXT,
    _NAME,
    _NAME_CLOSE,
    _BETWEEN,
    _PNAME,
    _KIND,
    _VALUE,
    _JSON,
    _JSON_END,
    _DAMAGED,
    _AFTER_DAMAGED,
) = range(12)


class _DsmlBody(Body):
    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        self.tags: _Tags = getattr(stream, "tags", _DSML_TAGS)
        self.closer = ""
        self.names = NameReader('"', "tool name", bad=LOOSE_NAME_BREAKS)
        self.name = ""
        self.index = -1
        self.id = ""
        self.param = ""
        self.is_text = True
        self.value: list[str] = []
        self._opened = False  # the current value's entry is open in the argument text
        self.args: dict[str, Any] = {}
        self.args_text: list[str] = []
        self.scanner = ObjectScanner()  # a JSON body's object, when the invoke has one
        #: The tolerances met, told once the block is read (a block that breaks later is
        #: text, and no tolerance was used).
        self.told: list[tuple[NoticeCode, str]] = []
        #: The invokes stand with no calls block around them (so no closer ends them).
        self.bare = False
        self.damaged: list[str] = []  # the damaged tag's text, while it is read
        #: The marker came inside a code fence: quoted markup, never a call.
        self.quoted = False

    def _delta(self, text: str) -> None:
        self.args_text.append(text)
        self.stream._args(self.index, text)

    def step(self, s: str, i: int) -> tuple[int, bool]:
        if self.quoted:
            return self.fail(i, f"{self.tags.word} quoted in a code fence"), False
        state = self.state
        if state == _VALUE:
            i = self._value(s, i)
            if self.status != OPEN or self.state == _VALUE:
                return i, False
            return i, True
        if state == _JSON:
            return self._json_body(s, i)
        if state in (_NAME, _PNAME):
            name, i = self.names.feed(s, i)
            if self.names.problem:
                return self.fail(i, self.names.problem), False
            if name is None:
                return i, False
            self.names = NameReader('"', "tool name", bad=LOOSE_NAME_BREAKS)
            if state == _NAME:
                tools = self.stream.tools
                if self.bare and not (tools.known and tools.has(name)):
                    return self.fail(i, f"a bare invoke of {name!r}, not a declared tool"), False
                self.name = name
                self.state = _NAME_CLOSE
            else:
                if name in self.args:
                    return self.fail(i, f"the parameter {name!r} is given twice"), False
                self.param = name
                self.state = _KIND
            return i, True
        if state == _BLOCK:
            return self._block(s, i)
        if state == _DAMAGED:
            return self._damaged(s, i)
        if state == _NEXT and self.bare:
            return self._next_bare(s, i)
        elif state == _NAME_CLOSE:
            j, literal = self.expect_one(
                s, i, (_NAME_END, _SELF_CLOSED), "text after the tool's name"
            )
            if j < 0:
                return i, False
            if literal == _SELF_CLOSED and self.stream.strict:
                return self.fail(i, "an invoke closed in its own tag"), False
            self._open_call()
            if literal == _SELF_CLOSED:
                self.told.append(
                    (
                        "recovered-self-closing",
                        f'read {self.tags.invoke}{self.name}"/> as a call to {self.name}'
                        " with no arguments",
                    )
                )
                self._close_call()
                self.state = _NEXT
            i = j
        elif state == _KIND:
            j, literal = self.expect_one(
                s,
                i,
                (_STRING + _KINDS[0], _STRING + _KINDS[1]),
                'a parameter without string="true" or "false"',
            )
            if j < 0:
                return i, False
            self.is_text = literal.endswith(_KINDS[0])
            self.value = []
            self.state = _VALUE
            i = j
        elif s[i] in WS:
            i += 1
        elif state == _AFTER_DAMAGED:
            tags = self.tags
            j = self.expect(s, i, tags.marker, f"no {tags.word} tag after a damaged one")
            if j < 0:
                return i, False
            self.state = _BLOCK
            i = j
        elif state == _NEXT:
            invoke = self.tags.invoke
            return self.next_call(s, i, invoke, self.closer, _NAME, "a block without an invoke")
        elif state == _JSON_END:
            end = self.tags.end_invoke
            j = self.expect(s, i, end, f"text after the JSON arguments before {end}")
            if j < 0:
                return i, False
            self._close_json_call()
            self.state = _NEXT
            i = j
        elif s[i] == "{" and not self.args_text and not self.stream.strict:
            self.scanner = ObjectScanner()
            self.state = _JSON
        else:  # _BETWEEN
            param, end = self.tags.parameter, self.tags.end_invoke
            j, literal = self.expect_one(s, i, (param, end), f'expected {param}…" or {end}')
            if j < 0:
                return i, False
            if literal == end:
                self._close_call()
                self.state = _NEXT
            else:
                self.state = _PNAME
            i = j
        return i, True

    def _block(self, s: str, i: int) -> tuple[int, bool]:
        """After the marker: the calls block's tag; unless strict, also a bare invoke, or a
        damaged tag (misspelt, its ``>`` lost) when a call follows it."""
        stream, tags = self.stream, self.tags
        bare_ok = not stream.strict and not getattr(stream, "broken", False)
        kinds = (*tags.blocks, tags.bare_invoke) if bare_ok else tuple(tags.blocks)
        status, j, literal = expect_any(s, i, kinds)
        if status == OPEN:
            return i, False
        if status == DONE and literal == tags.bare_invoke:
            self.bare = True
            self.told.append(
                ("recovered-section-missing", "read an invoke with no calls block around it")
            )
            self.state = _NAME
            return j, True
        if status == DONE:
            self.closer = tags.blocks[literal]
            self.state = _NEXT
            return j, True
        if self.stream.strict or self.state_damaged_before():
            return self.fail(i, self._no_block()), False
        self.state = _DAMAGED
        return i, True

    def _no_block(self) -> str:
        """Why the text after the marker is no calls block."""
        return f"no {' or '.join(self.tags.blocks)} after {self.tags.marker}"

    def state_damaged_before(self) -> bool:
        """One damaged tag is read past, not two."""
        return any(code == "recovered-misspelt-tag" for code, _ in self.told)

    def _damaged(self, s: str, i: int) -> tuple[int, bool]:
        """A damaged tag: to its line's end (or the next marker), then a call must follow."""
        line = s.find("\n", i)
        mark = s.find(self.tags.marker, i)
        stops = [k for k in (line, mark) if k >= 0]
        stop = min(stops) if stops else len(s)
        if not stops:  # hold back what may begin the marker: the next chunk decides
            stop -= markers((self.tags.marker,)).held(s, i, stop)
        self.damaged.append(s[i:stop])
        if sum(map(len, self.damaged)) > _MAX_DAMAGED:
            return self.fail(i, self._no_block()), False
        if not stops:
            return stop, False
        tag = self.tags.marker + "".join(self.damaged).rstrip()
        self.told.append(("recovered-misspelt-tag", f"read past the damaged tag {tag!r}"))
        self.damaged = []
        self.state = _AFTER_DAMAGED
        return stop, True

    def _next_bare(self, s: str, i: int) -> tuple[int, bool]:
        """Between bare invokes: another invoke, or the end of the calls (a stray closer of a
        calls block is theirs)."""
        if s[i] in WS:
            return i + 1, True
        invoke = self.tags.invoke
        status, j, literal = expect_any(s, i, (invoke, *self.tags.blocks.values()))
        if status == OPEN:
            return i, False
        if status == DONE and literal == invoke:
            self.state = _NAME
            return j, True
        self.status = DONE
        return (j if status == DONE else i), False

    def end_of_reply(self) -> None:
        if self.bare and self.state == _NEXT:
            self.status = DONE  # the reply ends after a bare invoke
            return
        super().end_of_reply()

    def _open_call(self) -> None:
        self.index, self.id = self.announce(self.name)
        self.args = {}
        self.args_text = []
        self.state = _BETWEEN

    def _value(self, s: str, i: int) -> int:
        j, end = self.tags.value_end.scan(s, i)
        if j > i:
            piece = s[i:j]
            self.value.append(piece)
            if self.is_text:
                self._delta_value_start()
                self._delta(json.dumps(piece, ensure_ascii=False)[1:-1])
        if not end:
            return j
        text = "".join(self.value)
        if self.is_text:
            self._delta_value_start()
            self._delta('"')
            self.args[self.param] = text
        else:
            try:
                self.args[self.param] = loads_json(text)
            except (ValueError, RecursionError) as exc:
                return self.fail(j, f'a string="false" value is not JSON ({exc})')
            self._delta_value_start()
            self._delta(text.strip())
        self._opened = False
        self.state = _BETWEEN
        return j + len(end)

    def _delta_value_start(self) -> None:
        """Open the value's entry in the streamed argument text, once."""
        if self._opened:
            return
        self._opened = True
        opener = "{" if not self.args_text else ", "
        quote = '"' if self.is_text else ""
        self._delta(opener + json.dumps(self.param, ensure_ascii=False) + ": " + quote)

    def _json_body(self, s: str, i: int) -> tuple[int, bool]:
        """The invoke's body as one JSON object, passed on as it streams."""
        j = self.feed_args(self.scanner, self.index, s, i)
        if self.status != OPEN or not self.scanner.done:
            return j, False
        args = self.json_args(self.scanner.text(), j)
        if args is None:
            return j, False
        self.args = args
        self.state = _JSON_END
        return j, True

    def _close_json_call(self) -> None:
        self.told.append(
            (
                "recovered-json-arguments",
                f"read the arguments of {self.name}, written as one JSON object in its invoke",
            )
        )
        text = self.scanner.text().strip()
        self.calls.append((self.index, ToolCall(self.id, self.name, dict(self.args), text)))

    def _close_call(self) -> None:
        self._delta("}" if self.args_text else "{}")
        call = ToolCall(self.id, self.name, dict(self.args), "".join(self.args_text))
        self.calls.append((self.index, call))


class DeepSeekDsmlStream(MarkerStream):
    marker = _DSML
    #: The literals of the grammar this stream reads.
    tags: ClassVar[_Tags] = _DSML_TAGS
    turn_end = "<｜end▁of▁sentence｜>"
    body_class = _DsmlBody
    #: The fence the reply's text is inside (``""`` when none), and the head of the current
    #: line while it may still open or close one (None once it cannot).
    _fence = ""
    _head: str | None = ""
    #: A calls block (or bare invoke) broke earlier in the reply: no bare invoke is read
    #: after it, since the invokes left of that block are its text.
    broken = False

    def new_body(self) -> Body:
        body = _DsmlBody(self)
        body.quoted = bool(self._fence)  # markup quoted in a code fence is prose, not a call
        return body

    def _give_back(self, body: Body) -> None:
        if isinstance(body, _DsmlBody) and body.quoted:
            self._text("".join(self._raw))  # quoted: it was never meant as a call
            self._body = None
            self._raw = []
            return
        if isinstance(body, _DsmlBody) and (body.closer or body.bare):
            self.broken = True  # the invokes of a block that broke stay text with it
        super()._give_back(body)

    def _text(self, text: str) -> None:
        self._track_fences(text)
        super()._text(text)

    def _track_fences(self, text: str) -> None:
        """Follow the reply's text line by line: a line opening with ``` or ~~~ opens a
        fence, and one opening with the same fence closes it. Only each line's head is
        looked at, so following is linear in the text."""
        pos = 0
        n = len(text)
        while pos <= n:
            line = text.find("\n", pos)
            end = n if line < 0 else line
            if self._head is not None:
                self._head += text[pos : min(end, pos + 8)]
                head = self._head.lstrip(" \t")
                if len(head) >= 3 or line >= 0 or len(self._head) > 8:
                    fence = head[:3]
                    if fence in _FENCES and not self._fence:
                        self._fence = fence
                    elif fence == self._fence:
                        self._fence = ""
                    self._head = None
            if line < 0:
                return
            self._head = ""
            pos = line + 1

    def _close(self, body: Body) -> None:
        if body.status == DONE and isinstance(body, _DsmlBody):
            for code, message in body.told:
                self._notice(code, message)
        super()._close(body)


class GigaChatGcmlStream(DeepSeekDsmlStream):
    """GigaChat 3.5's calls: DSML's grammar under the ``<｜GCML｜`` prefix, read alike
    (the same tolerances, the same strictness), its turn ended by ``</s>``."""

    marker = _GCML
    tags = _GCML_TAGS
    turn_end = "</s>"  # the models' end-of-sequence token


def _writer(tags: _Tags) -> Sample:
    """The sample call of one prefix's grammar, laid out as the templates write it."""
    block = "tool_calls>"  # V4's block and GigaChat's only one

    def sample(name: str, args: Mapping[str, Any], index: int) -> str:
        params = "".join(
            f'{tags.parameter}{k}" string="{kind}">{text}{tags.end_parameter}\n'
            for k, v in args.items()
            for kind, text in [("true", v) if isinstance(v, str) else ("false", json.dumps(v))]
        )
        return (
            f'{tags.marker}{block}\n{tags.invoke}{name}">\n'
            + params
            + f"{tags.end_invoke}\n{tags.blocks[block]}"
        )

    return sample


def _form(tags: _Tags) -> AnyOf:
    """The constrained call of one prefix's grammar: a calls block of typed invokes."""
    body = Tagged(
        before=lit(tags.invoke),
        between='"\\">"',
        after=lit(tags.end_invoke),
        arg_open=(tags.marker + 'parameter name="{key}" string="{type}">',),
        arg_close=(tags.end_parameter,),
        types=(("string", "true"), ("*", "false")),
    )
    return AnyOf(
        tuple(
            CallForm(
                body, open=lit(tags.marker + block), close=lit(closer), triggers=(tags.marker,)
            )
            for block, closer in tags.blocks.items()
        )
    )


class DeepSeekDsml(Family):
    name = "deepseek-dsml"
    label = "DeepSeek DSML <｜DSML｜invoke>/<｜DSML｜parameter> (DeepSeek V3.2, V4)"
    reasoning = THINK
    end_tokens = ("<｜end▁of▁sentence｜>",)
    samples = (_writer(_DSML_TAGS),)
    markers = (_DSML,)
    stream_class = DeepSeekDsmlStream
    grammar = _form(_DSML_TAGS)


class GigaChatGcml(Family):
    """GigaChat 3.5: its own family (its models, marker and end token), DSML's grammar."""

    name = "gigachat-gcml"
    label = "GigaChat GCML <｜GCML｜invoke>/<｜GCML｜parameter> (GigaChat 3.5)"
    reasoning = THINK
    end_tokens = ("</s>",)
    samples = (_writer(_GCML_TAGS),)
    markers = (_GCML,)
    stream_class = GigaChatGcmlStream
    grammar = _form(_GCML_TAGS)
