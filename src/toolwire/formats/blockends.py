"""Where a block of calls ends when its words did not all come, for the engine's reader
(:mod:`.shapereader`): an item of a list that is not a call (left out, the list read on), a
call opened with its opening words left out (read only when whole: its closing words came,
or it names a declared tool), what follows a call that is a block of its own, and the reply
ending where only closing words were due. Each a decision taken once for every syntax, named
in a notice and refused by strict reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import NoticeCode
from ..messages import ToolCall
from .formsteps import NAMED
from .jsonsteps import IN_LIST
from .listitems import ItemEnd
from .markerstream import DONE, FAILED, OPEN, WS, Body, MarkerStream, expect_any, expect_literal
from .scan import markers
from .tagsteps import _ARGS, _BETWEEN, _CALL, _END, _LITS, _NEXT, _RESYNC, _SKIP
from .textargs import TextArgs

if TYPE_CHECKING:
    from .derived import DerivedShape

__all__ = ["UNOPENED", "BlockEnds", "shape_frames"]

#: The object that opens a call whose opening words were left out, right after a closed call.
UNOPENED = "{"
#: How much white space after a closed call is looked through for such a call.
_MAX_GAP = 32


def shape_frames(shape: DerivedShape) -> bool:
    """Whether a block of ``shape`` frames each call in words of its own inside a block its
    own words close (Kimi K2's section of ``<|tool_call_begin|>…<|tool_call_end|>``, MiniMax
    M2's invokes): a call that breaks there can be left out, the block read on from the next
    call's words (a list's items are found by :mod:`.listitems` instead)."""
    if not shape.trail or shape.trail_optional or not shape.next_call:
        return False
    return shape.next_call[0] not in (",", ";") and shape.next_call != shape.opening


class BlockEnds(Body):
    """The block-end steps of the engine's body (a mixin of its reader's body)."""

    shape: DerivedShape
    stream: MarkerStream
    call: TextArgs | None
    calls: list[tuple[int, ToolCall]]
    told: list[tuple[NoticeCode, str]]
    todo: list[str]
    state: int
    then: int
    key: str
    bare: bool
    certain: bool
    unopened: bool
    then_unopened: bool
    told_unopened: bool
    item_end: ItemEnd | None
    item_problem: str
    rest: str
    call_text: list[str]
    calls_before: int
    resynced: bool
    resync_at: int
    index: int
    model_id: str
    json_call: object

    listed: bool
    py_listed: bool
    opened_by: str
    turn_ended: bool
    call_mark: int
    in_list: bool

    if TYPE_CHECKING:  # the body's own, which this mixin's steps call

        def end_call(self) -> None: ...

        def words(self, words: tuple[str, ...], then: int) -> None: ...

        def python_ends(self) -> None: ...

        def python_broken(self) -> ItemEnd | None: ...

    def _left_item(self, item: ItemEnd, i: int) -> tuple[int, bool]:
        """Unless strict, an item of a list that is not a call (the body failed on it) is
        left out: its call, if announced, withdrawn; the rest of it read up to the next
        item (:class:`~.listitems.ItemEnd`); its text given back once the block is read.
        A list none of whose items is a call is no list of calls (see _then)."""
        self.item_problem = self.reason
        self.status, self.reason = OPEN, ""
        read = {index for index, _ in self.calls}
        for index, cid in self.started:
            if index not in read:
                self.stream._abort(index, cid, self.item_problem)
        self.started = [(index, cid) for index, cid in self.started if index in read]
        self.item_end = item
        self.state = _SKIP
        return i, True

    def leave_call(self, text: str) -> bool:
        """Unless strict, a call that broke inside a block that frames each call
        (:func:`shape_frames`) is left out: its call, if announced, withdrawn, its rest read
        up to its own end or the next call's or the block's words (``_RESYNC``), its text
        given back once the block is read, the block's other calls read (one malformed call
        does not lose them). ``text``: the piece of its text read since the last was kept.
        False where the body did not break inside a call (between calls, or in the block's
        closing words): the block then fails whole, as before."""
        if self.state in (_NEXT, _END) or (self.state == _LITS and self.then == _END):
            return False
        if self.bare or self.unopened or self.item_end is not None:
            return False
        item = None
        if self.py_listed:  # (a list of Python calls: the rest of the broken one, found so)
            item = self.python_broken() if self.state == _ARGS else None
            if item is None:
                return False
        self.call_text.append(text)
        self.item_problem = self.reason
        self.status, self.reason = OPEN, ""
        del self.calls[self.calls_before :]  # (read whole, its closing words broken)
        read = {index for index, _ in self.calls}
        for index, cid in self.started:
            if index not in read:
                self.stream._abort(index, cid, self.item_problem)
        self.started = [(index, cid) for index, cid in self.started if index in read]
        self.call = None
        self.json_call = None
        self.index, self.model_id, self.key = -1, "", ""
        if item is not None:
            text = "".join(self.call_text).lstrip(WS)
            # (the words before the call: the separator, or the block's opening words)
            for word in (*self.shape.next_call[:1], *self.shape.opening[1:]):
                if text.startswith(word):
                    text = text[len(word) :].lstrip(WS)
            item.parts.append(text)
            self.call_text = []
            self.item_end = item
            self.state = _SKIP
            return True
        self.state = _RESYNC
        return True

    def resync(self, s: str, i: int) -> tuple[int, bool]:
        """A broken call's rest: up to its own last closing word (taken), or the next
        call's or the block's words (left for ``_NEXT``)."""
        shape = self.shape
        j, end = markers((*shape.post[-1:], *shape.next_call[:1], *shape.trail[:1])).scan(s, i)
        if not end:
            return j, False
        stop = j + len(end) if shape.post and end == shape.post[-1] else j
        self.resynced, self.resync_at = True, stop
        self.state = _NEXT
        return stop, False  # (the piece's text up to here is the broken call's: see feed)

    def one_block(self, s: str, i: int) -> bool | None:
        """Unless strict, another call where a block that holds one call was to close, its
        own closing words written: the call's opening words after the block's
        (``<|tool_call>call:f{…}call:g{…}<tool_call|>``, Qwen XML's ``<function=`` twice in
        one ``<tool_call>``), or, where the block's word alone opens a call, a JSON call
        object (``<tool_call>{…}{…}</tool_call>``). Read in the same block, named
        (``recovered-calls-one-block``). True when read (the call's words are next), False to
        wait, None when this is not that."""
        shape = self.shape
        if (
            self.stream.strict
            or self.bare
            or self.unopened
            or shape.trail
            or not shape.post
            or shape.next_call != shape.opening
            or self.todo != list(shape.post[-1:])
        ):
            return None
        if expect_literal(s, i, shape.post[-1])[0] == DONE:
            return None  # the block's closer (which may begin as the call's words: ``` )
        inner = shape.opening[1:]
        if inner:
            status, _j = expect_literal(s, i, inner[0])
            if status == OPEN:
                return False
            if status == FAILED:
                return None
        elif shape.kind != "json" or s[i] != "{":
            return None
        if not any(code == "recovered-calls-one-block" for code, _ in self.told):
            what = f"read calls written one after another in one {shape.marker}"
            self.told.append(("recovered-calls-one-block", what))
        self.opened_by = inner[-1] if inner else shape.opening[-1]
        self.call_mark = i  # (the next call's text starts here: see feed)
        self.calls_before = len(self.calls)
        self.words(inner, _CALL)
        return True

    def _bare_read(self, i: int) -> int:
        """A call opened where words were left out, none of their closing words written, is
        whole before ``s[i]``: read when it names a declared tool, unless strict (nothing
        else confirms it is a call), else it fails back to text."""
        tools = self.stream.tools
        named = self.certain or (tools.known and tools.has(self.calls[-1][1].name))
        if not named:  # (a special token opened it: certain; else a declared name says so)
            name = self.calls[-1][1].name
            return self.fail(i, f"{name!r}, opened with the words before it left out, is no tool")
        if not self.told_unopened:  # (named once, its own closing words written or not)
            left = " ".join(self.shape.opening[: self.shape.left_out])
            what = f"read a call written with neither {left} nor its closing words"
            self.told.append(("recovered-unopened-call", what))
        self.status = DONE
        return i

    def _after(self, s: str, i: int) -> int:
        """After a closed call that is a block of its own: look (without taking it) at
        what follows. The body ends here; when a JSON object comes next, the stream may
        read it as a call whose opening words were left out (templates that open the calls
        once a turn and close each one, as vLLM's ``hermes_2_pro`` does, teach a model to
        write its later calls so). It is a call only if it is one and its own closing
        words follow it; else it stays text, with no notice: it never became a call."""
        k = i
        while k < len(s) and s[k] in WS and k - i <= _MAX_GAP:
            k += 1
        if k == len(s) and k - i <= _MAX_GAP:
            return i  # only whitespace so far: wait for what comes after it
        self.then_unopened = k < len(s) and s[k] == UNOPENED
        self.status = DONE
        return i

    def end_of_reply(self) -> None:
        self.python_ends()
        shape = self.shape
        ends = shape.ends_with_turn or shape.trail_optional or not shape.trail
        # (with the turn's end closing the block, its closing words may have begun: Llama
        # 4's list closed, its <|python_end|> not written)
        closing = self.state == _LITS and self.then == _END and len(self.todo) < len(shape.trail)
        if (self.state == _NEXT or (closing and shape.ends_with_turn)) and ends and self.calls:
            self.status = DONE
            self._rest_is_text()
            return
        if self.bare:  # a call opened so is read only when whole, no other repair with it
            after = self.state == _NEXT or (self.state == _LITS and self.then == _NEXT)
            if after and self.calls:
                self._bare_read(0)
                if self.status == DONE:
                    self._rest_is_text()  # (another call's start, cut short)
            if self.status != DONE:
                super().end_of_reply()
            return
        if not self.stream.strict and not self.unopened and self._whole():
            # the reply ended (a length limit, an engine that strips the end token) where
            # only closing words were due: every call is whole, as vLLM and SGLang read it
            self.told.append(
                (
                    "recovered-unclosed-tag",
                    "read a call whose closing words never came: the reply ended where only "
                    "they were due",
                )
            )
            self.status = DONE
            self._rest_is_text()
            return
        super().end_of_reply()

    def _rest_is_text(self) -> None:
        """The block ended with the reply after its whole calls: what the body held back to
        see what came next is reply text, given back once the calls end (another call's
        start, cut short), unless it is white space or the closing words that were due, cut
        short or whole (the block's own), for every syntax."""
        held = self.stream._raw[-1]
        trail = self.shape.trail
        lead = len(held) - len(held.lstrip(WS))
        if trail and held.startswith(trail[0], lead):
            held = held[lead + len(trail[0]) :]
        compact = "".join(held.split())
        due = "".join(self.todo) if self.state == _LITS else "".join(trail)
        self.rest = "" if not compact or due.startswith(compact) else held

    def _whole(self) -> bool:
        """Whether the reply may end here with every call read: each call whole, only the
        block's closing words due. A JSON payload is whole once its braces close; a tagged
        call only once its own closing words came (cut after a value, more arguments may
        have been to come, and a call must not run without them: SGLang's MiniCPM and
        MiniMax readers and vLLM's GLM reader leave it text) — or, where the syntax writes
        no closing words for a call, after its last value."""
        state = self.state
        if state == _BETWEEN and self.call is not None and not self.key:
            if self.shape.post or not self.call.args:
                return False
            self.end_call()
            return True
        if state == _LITS and self.then in (_NEXT, _END) and self.calls:
            return True
        if self.in_list and state in (IN_LIST, _CALL):  # a list of calls cut after one
            return bool(self.calls)
        return state == _NEXT and bool(self.calls)

    def _next(self, s: str, i: int) -> tuple[int, bool]:
        """After a call: the next call, the block's closing words, or (with none) the end."""
        shape = self.shape
        if not shape.trail and shape.next_call == shape.opening and shape.opening:
            if shape.kind == "json" and not self.stream.strict:
                return self._after(s, i), False
            self.status = DONE  # every call is its own block: the marker finds the next
            return i, False
        if shape.trail and not shape.trail_optional and s[i] in WS and not self.bare:
            return i + 1, True  # the block must close
        k = i
        while k < len(s) and s[k] in WS and k - i <= 8:
            k += 1
        if k - i > 8:  # a paragraph break: the block is over
            self.status = DONE
            return i, False
        if k == len(s):
            return i, False  # wait: what follows the whitespace decides
        if self.turn_ended:
            return self.fail(k, "text after the turn's end token"), False
        status, j, _ = expect_any(s, k, self.stream.turn_ends)
        if status == OPEN:
            return i, False
        if status == DONE:  # the turn ended here, if nothing follows: the reply's end decides
            self.turn_ended = True
            return j, True
        # a JSON call that nothing closes may be followed by another as Python's are (Llama 3's)
        bare_json = shape.kind == "json" and not (shape.trail or shape.post)
        if shape.kind == "name-python" and not shape.next_call and s[k] == ";":
            self.state = _CALL  # Python's statement separator: two calls on one line
            self.call_mark = k + 1  # (the next call's text starts here: see feed)
            self.calls_before = len(self.calls)
            return k + 1, True
        if bare_json and not shape.next_call and s[k] == ";":
            return self._semicolon(s, i, k)
        follows = s[k] == "{" if shape.kind == "json" else bool(NAMED.match(s[k]))
        if (
            not shape.next_call
            and (shape.trail or bare_json)
            and follows
            and not (shape.trail and s[k] == shape.trail[0][0])
        ):
            # nothing between two calls (one a line: Olmo 3's, MiniMax M1's): the next begins
            self.state = _CALL
            self.call_mark = k  # (the next call's text starts here: see feed)
            self.calls_before = len(self.calls)
            return k, True
        if self.listed and s[k] == "{" and not self.stream.strict:
            # the separator left out between two items: the next call is here
            self.told.append(
                ("recovered-list-separator", f"read calls listed without {shape.next_call[0]}")
            )
            self.opened_by = shape.next_call[-1]
            self.state = _CALL
            return k, True
        for then, words in ((_CALL, shape.next_call), (_END, shape.trail)):
            if not words:
                continue
            status, j = expect_literal(s, k, words[0])
            if status == OPEN:
                return i, False
            if status == DONE:
                if then == _CALL:
                    self.opened_by = words[-1]
                    self.call_mark = k  # (the next call's text starts here: see feed)
                    self.calls_before = len(self.calls)
                self.words(words[1:], then)
                return j, self.status == OPEN
        if self.bare and self.calls:  # calls opened with the block's words left out: whole
            return self._bare_read(i), False
        reopens = shape.trail and shape.opening[1:] == shape.next_call and not self.listed
        if reopens and not self.stream.strict:
            # the block opened again before it closed (a model that frames each call as a
            # block of its own, DeepSeek's begin words written again): one block, named
            status, j = expect_literal(s, k, shape.marker)
            if status == OPEN:
                return i, False
            if status == DONE:
                if not any(code == "recovered-block-reopened" for code, _ in self.told):
                    what = (
                        f"read calls whose block {shape.marker} was opened again before it closed"
                    )
                    self.told.append(("recovered-block-reopened", what))
                self.opened_by = shape.marker
                self.call_mark = k  # (the next call's text starts here: see feed)
                self.calls_before = len(self.calls)
                self.words(shape.next_call, _CALL)
                return j, True
        if shape.trail and not shape.trail_optional:
            return self.fail(k, f"expected {shape.trail[0]} after the call"), False
        self.status = DONE  # text after the calls: reply text
        return i, False

    def _semicolon(self, s: str, i: int, k: int) -> tuple[int, bool]:
        """``;`` after a JSON call nothing closes (Llama 3's): the next call's object, or its
        marker opening a block of its own (``; <|python_tag|>{…}``), each after any white
        space; else the calls are over, the ``;`` the reply's text."""
        m = k + 1
        while m < len(s) and s[m] in WS and m - k <= 8:
            m += 1
        if m == len(s) and m - k <= 8:
            return i, False  # wait: what follows decides
        if m < len(s) and s[m] == "{":
            self.state = _CALL
            return m, True
        shape = self.shape
        status = expect_literal(s, m, shape.marker)[0] if shape.opening else FAILED
        if status == OPEN:
            return i, False
        self.status = DONE
        return (m if status == DONE else i), False
