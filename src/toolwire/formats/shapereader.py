"""The reader of a :class:`~toolwire.formats.derived.DerivedShape`: one block of calls read
one step at a time, for every shape a template teaches or a family declares.

Linear and streaming (each character looked at once, however the reply is cut), bounded (a
body waits for one word at most), and a call that does not parse stays text with a notice.
What the engine reads for every shape besides the shape's own words, each named in a notice
and refused by strict reading: a call whose opening words were left out after a closed one,
arguments encoded twice, a text value written as JSON, a key with no value, newlines between
the words written as ``\\n``, a block the reply ended before its closing words, an item of a
list that is not a call, a separator left out between two items.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..events import NoticeCode
from ..messages import ToolCall
from .attributes import Attributes, closes_attribute
from .blockends import UNOPENED, BlockEnds, shape_frames
from .codesteps import CODE_STATES, CodeSteps
from .dialects import DIALECTS
from .elements import Elements
from .formsteps import FormSteps
from .jsoncall import JsonCall
from .jsonscan import ObjectScanner
from .jsonsteps import IN_LIST, NOT_OBJECT, JsonSteps
from .listitems import ItemEnd
from .markerstream import (
    DONE,
    FAILED,
    MAX_HELD,
    OPEN,
    WS,
    MarkerStream,
    expect_literal,
)
from .namedby import NameSteps
from .pyliteral import LiteralReader
from .pysteps import PySteps
from .scan import special_words
from .tagforms import DAMAGED, ELEMENTS, OBJECT, TagForms
from .tagsteps import (
    _ARGS,
    _BETWEEN,
    _CALL,
    _CDATA,
    _END,
    _HELD,
    _JSON,
    _KEY,
    _LITS,
    _NAME,
    _NEXT,
    _RESYNC,
    _SKIP,
    _VALUE,
    _VALUE_FIRST,
    _VALUE_WS,
    CALL_ID,
    NUMBER,
    Name,
    TagSteps,
    shape_stops,
)
from .textargs import HELD, NameReader, TextArgs, TextBody

if TYPE_CHECKING:
    from .derived import DerivedShape
    from .derivedstream import DerivedStream

__all__ = ["CALL_ID", "MAX_WORD", "NUMBER", "DerivedBody", "Words"]

Words = tuple[str, ...]

#: The longest learned word: a body may wait for a whole word, and must not hold much.
MAX_WORD = MAX_HELD - 16


class DerivedBody(
    FormSteps, NameSteps, CodeSteps, BlockEnds, JsonSteps, TagForms, TagSteps, PySteps, TextBody
):
    """One block of calls in a :class:`DerivedShape`, read one step at a time."""

    stream: DerivedStream

    def __init__(self, stream: MarkerStream) -> None:
        super().__init__(stream)
        opened = stream.opened_by
        shape = self.stream.shape_for(opened)  # (the stream of a DerivedBody is a DerivedStream)
        self._use(shape)
        #: The call is read and a call without its opening words may follow it.
        self.then_unopened = False
        self.told_unopened = False
        #: The call opened at ``opening[left_out]``, the words before it left out (see
        #: DerivedShape.left_out), or at its JSON object right after a closed call.
        self.bare = opened not in (shape.marker, UNOPENED)
        #: Opened so at a special token the family writes for calls only (Kimi K2's
        #: ``<|tool_call_begin|>`` with no section): certain as a marker is, its name any.
        word = shape.opening[shape.left_out] if self.bare else ""
        self.certain = self.bare and word in special_words((word,))  # (a token, all of it)
        #: Opened where the reply starts, its marker written by the prompt (see
        #: Syntax.primed): no call markup until its arguments begin; ``primed_start`` while
        #: the reply may still write the marker itself.
        self.primed = self.primed_start = self.stream.primed_now
        #: A call's name was read where a call was due (see ``_name``): whatever fails after
        #: it is named, even in a whole reply (see :mod:`.wholereply`).
        self.looked = self.shape.kind == "json" and not (self.shape.whole and self.shape.opening)
        #: A call's name and the words after it were read as written (see ``deferred``).
        self.headed = False
        self.word_left_out = False
        self.unopened = opened == UNOPENED and shape.marker != UNOPENED
        self.at_object = shape.whole and not shape.opening and shape.kind == "json"
        if self.bare:
            self.todo = list(shape.opening[shape.left_out + 1 :])
        self.then = _CALL
        self.state = _LITS
        #: ``tags``: the key read, its value not yet opened; the key whose value is held.
        self.key = ""
        self.value_key = ""
        self.held: list[str] = []
        #: The repairs used, told once the block is read (a block given back tells none).
        self.told: list[tuple[NoticeCode, str]] = []
        self.escaped_newline = False  # told once a call
        #: The id the model wrote in the framing for the call coming (see CALL_ID).
        self.model_id = ""
        #: The family's end-of-turn token came where the next call or the block's end was due.
        self.turn_ended = False
        self.item_end: ItemEnd | None = None
        self.item_problem = ""
        #: Reply text the block ended on after its calls (see BlockEnds._rest_is_text).
        self.rest = ""
        #: The items left out, and why: given back as text once the block is read.
        self.left: list[tuple[str, str]] = []
        #: The text of the call being read where a block may leave a broken one out (see
        #: ``framed``), and where in the piece being read the next call began (-1: not in it).
        self.call_text: list[str] = []
        self.call_mark = -1
        self.resynced = False
        self.resync_at = 0
        self.calls_before = 0
        self.digits = 0
        self.number = ""
        #: The call's name is left out, only its number written (see DerivedShape.id_words):
        #: it is named by its arguments once they are whole.
        self.counter = False
        #: ``json_too``: the list's calls are JSON objects (its first call says; None before).
        self.list_json: bool | None = None
        self.json_call: JsonCall | None = None
        self.attributes: Attributes | None = None
        self.names: NameReader | None = None
        self.scanner: ObjectScanner | None = None
        #: ``name-literal``: the arguments' reader, and their JSON text so far.
        self.literal: LiteralReader | None = None
        self.arg_text: list[str] = []
        self.index = -1
        self.id = ""
        self.call_name = ""
        #: A value's type name while it is read (DerivedShape.type_tag), else None.
        self.type_name: str | None = None
        #: What the value's tag says it is (DerivedShape.type_attr): "text" (kept as
        #: written), "json" (read as what it stands for), or "" (not said).
        self.value_type = ""
        #: An item named the template's pseudo-tool (DerivedShape.no_tools), left out.
        self.no_tool = False
        self.args_whole = False
        self.damage: list[str] | None = None
        self.elements: Elements | None = None

    def _use(self, shape: DerivedShape) -> None:
        """Read the block in ``shape`` (the form its opening chose)."""
        self.shape = shape
        self.todo: list[str] = list(shape.opening[1:])
        #: The word a call's payload comes after (named when no payload follows it).
        self.opened_by = shape.opening[-1] if shape.opening else ""
        #: A list of calls (``[…, …]``): an item that is not a call is left out (see _left).
        self.listed = shape.kind == "json" and bool(shape.trail) and not shape.trail_optional
        # what ends a name, a key and a value: the shape's, worked out once a shape
        self.name_stops, self.key_stops, strict_ends, lenient_ends = shape_stops(shape)
        self.value_ends = strict_ends if self.stream.strict else lenient_ends
        self.keys = Name(self.key_stops, "argument name")
        #: A list of Python calls: one that breaks in its parentheses is left out (see
        #: BlockEnds.leave_call).
        self.py_listed = shape.kind == "name-python" and bool(shape.trail)
        self.py_listed = self.py_listed and not shape.trail_optional
        #: Each call is framed by words in a block: a broken one may be left out (see
        #: BlockEnds.leave_call).
        self.framed = (shape_frames(shape) or self.py_listed) and not self.stream.strict

    def words(self, words: Words, then: int) -> None:
        """Match ``words`` next, then go on in state ``then``."""
        self.todo = list(words)
        self.then = then
        self.state = _LITS
        if not words:
            self._then(0)

    def feed(self, s: str, i: int) -> int:
        """:meth:`Body.feed`, the states most characters are read in (a name's arguments, a
        JSON call object) called straight: a step less per chunk. The text of the call being
        read is kept where a block may leave a broken call out (see BlockEnds.leave_call)."""
        n = len(s)
        mark = i  # where this piece's part of the current call starts
        while True:
            going = True
            while i < n and going:
                state = self.state
                if state == _ARGS:
                    scanner = self.scanner
                    if scanner is not None and scanner.parts and self.index >= 0:
                        # (most pieces: in a JSON object of arguments; see _args)
                        i, going = self._args_read(scanner, scanner.feed(s, i))
                    else:
                        i, going = self._args(s, i)
                elif state == _JSON:
                    call = self.json_call
                    if call is not None and call.noted and call.index >= 0 and self.looked:
                        # (most pieces: in its arguments, the object not over; see _json)
                        k = call.scanner.feed(s, i)
                        if call.scanner.over:
                            i, going = self._json_over(call, s, i, k)
                        else:
                            i, going = k, False
                    else:
                        i, going = self._json(s, i)
                elif state == _VALUE:
                    i, going = self._value(s, i)
                elif state == ELEMENTS:
                    elements = self.elements
                    assert elements is not None
                    k = elements.feed(s, i)  # (most pieces: a value's text; see nested_value)
                    if elements.done or elements.problem:
                        i, going = self.nested_value(s, k, _BETWEEN)
                    else:
                        i, going = k, False
                else:
                    i, going = self.step(s, i)
            if not self.framed:
                return i
            if self.status == OPEN and not self.resynced and self.call_mark < 0:
                self.call_text.append(s[mark:i])  # (most pieces: inside a call)
                return i
            # (a step that breaks a call stops the loop: the call is kept here, between)
            if self.resynced:  # a broken call's text, to be given back
                text = "".join(self.call_text) + s[mark : self.resync_at]
                self.left.append((text.strip(WS), self.item_problem))
                self.call_text, mark, self.resynced = [], self.resync_at, False
                if self.status == OPEN and i < n:
                    continue  # (resync stops the loop only to keep that text: read on)
            if self.call_mark >= 0:  # the last call begun in this piece began there
                self.call_text, mark, self.call_mark = [], self.call_mark, -1
            if self.status == FAILED and self.leave_call(s[mark:i]):
                mark = i
                continue
            if self.status == OPEN:
                self.call_text.append(s[mark:i])
            return i

    def step(self, s: str, i: int) -> tuple[int, bool]:
        """The states :meth:`feed` does not call straight."""
        state = self.state
        if (self.unopened or self.at_object) and self.json_call is None:
            # opened at the object itself, right after a closed call (see _after), or where
            # a whole reply's call object starts (see .wholereply)
            self._call(UNOPENED, 0)
            assert self.json_call is not None
            self.feed_json_call(self.json_call, UNOPENED, 0, NOT_OBJECT)
            return i, True
        if state == _LITS:
            if not self.todo:
                return self._then(i)
            if self.todo[0] == NUMBER:
                return self._number(s, i)
            if self.todo[0] == CALL_ID:
                return self._call_id(s, i)
            word = self.todo[0]
            if word.isspace():  # white space the template writes: read where it is written
                status, j = expect_literal(s, i, word)
                if status == OPEN:
                    return i, False
                self.word_left_out = self.word_left_out or status == FAILED
                self.todo.pop(0)
                return self._then(j) if not self.todo else (j, True)
            if s[i] == '"' and self.then == _BETWEEN and self._after_name():
                step = self.self_closed(s, i, word, _NEXT)
                if step is not None:
                    return step
            if self.attributes is not None or (s[i] == '"' and closes_attribute(word)):
                step = self._attributes(s, i)
                if step is not None:
                    return step
            if self.type_name is not None or (
                self.then == _VALUE_WS and self.shape.type_tag and len(self.todo) == 1
            ):
                step = self.type_tag(s, i)  # the value's type, before its last opening word
                if step is not None:
                    return step
            if s[i] in WS:
                return i + 1, True
            j = self._escaped(s, i)
            if j != i:
                return max(j, i), j > i
            if self.then == _VALUE_WS and len(self.todo) < len(self.shape.key_mid):
                j = self._left_out(s, i, word)
                if j != i:
                    return max(j, i), j > i
            if self._after_name():
                went = self.no_separator(s, i, word)  # the words after a name left out?
                if went is not None:
                    return i, went
            if self.then == _CALL and len(self.todo) == 1 and word.endswith("."):
                went = self._no_namespace(s, i, word)
                if went is not None:
                    return i, went
            if expect_literal(s, i, word)[0] == FAILED:
                went = self._other_form(s, i)
                if went is not None:
                    return i, went
                if self.then == _CALL:  # a call with its block left out, or a damaged tag
                    step = self.bare_after_marker(s, i, _CALL) or self.damaged(s, i, _CALL)
                    if step is not None:
                        return step
            if self.then == _NEXT and self.calls:
                went = self.one_block(s, i)  # another call before the block's closer?
                if went is not None:
                    return i, went
            if self.bare and self.then == _NEXT:  # the left-out words' closers were due
                status, j = expect_literal(s, i, self.shape.opening[self.shape.left_out])
                if status == OPEN:
                    return i, False
                if status == DONE:  # another call opened so: this one is whole
                    return self._bare_read(i), False
            problem = (
                f"text after the call before {word}" if self.then == _NEXT else f"expected {word}"
            )
            j = self.expect(s, i, word, problem)
            if j < 0:
                return i, False
            self.todo.pop(0)
            return self._then(j) if not self.todo else (j, True)
        if state == _CALL:
            return self._call(s, i)
        return self._rest(s, i)

    def _value(self, s: str, i: int) -> tuple[int, bool]:
        """A tagged value's text, up to the words that end it."""
        assert self.value_ends is not None
        i, complete = self.read_value(s, i, self.value_ends, _BETWEEN)
        if complete:
            if not s.endswith(self.shape.value_end[0], 0, i):
                self.drifted(s, i)
            self.words(self.shape.value_end[1:], _BETWEEN)
        return i, complete

    def _rest(self, s: str, i: int) -> tuple[int, bool]:
        """The states of the words between calls and of a tagged call's arguments."""
        state = self.state
        if state == _RESYNC:
            return self.resync(s, i)
        if state == _SKIP:
            assert self.item_end is not None
            j = self.item_end.feed(s, i)
            if self.item_end.failed:  # its end cannot be found: the block is no block
                return self.fail(i, f"{self.item_problem}; its end not found"), False
            if j == len(s):
                return j, False
            self.left.append((self.item_end.text(), self.item_problem))
            self.item_end = None
            self.state = _NEXT
            return j, True
        if state == _NAME:
            return self._name(s, i)
        if state == OBJECT:
            return self.json_body(s, i, _BETWEEN)
        if state == IN_LIST:
            return self.list_step(s, i)
        if state == DAMAGED:
            return self.damaged_step(s, i, _CALL)
        if state == _BETWEEN:
            return self.between(s, i)
        if state == _KEY:
            return self._key(s, i)
        if state == _VALUE_WS:
            if self.key:  # the key's value opens: the key is given
                if not self.named(self.key, False, i, self.value_type):
                    return i, False
                self.value_key, self.key = self.key, ""
            lead = self.shape.value_lead
            status, j = expect_literal(s, i, "\r\n" if lead == "\n" and s[i] == "\r" else lead)
            if status == OPEN:
                return i, False
            self.state = _VALUE_FIRST
            return (j if status == DONE else i), True
        if state == _VALUE_FIRST:
            if self.shape.nested:  # its text, or elements, up to its own closing tag
                assert self.call is not None
                self.elements = Elements(self.call, self.value_key, self.shape.key_open[0])
                self.state = ELEMENTS
                return i, True
            j = self._cdata_start(s, i) if self.shape.cdata else i
            if j < 0:
                return i, False  # wait: is it the CDATA opener?
            if j > i:
                self.state = _CDATA
                return j, True
            # a value its tag types (DerivedShape.type_attr) is read so, strict or not
            kind = self.value_type
            verbatim = self.shape.verbatim or kind == "text"
            held = kind == "json" or (s[i] in HELD and not (self.stream.strict or verbatim))
            if not held:
                self.value_type = ""  # (its tag said so for this value only)
            self.state = _HELD if held else _VALUE
            return i, True
        if state == _CDATA:
            return self._cdata(s, i)
        if state in CODE_STATES:
            return self.code_step(s, i)
        if state == _HELD:
            return self._held(s, i)
        return self._next(s, i)

    def _then(self, i: int) -> tuple[int, bool]:
        """The words are matched: go on to the next state (the block may be over)."""
        if self.then == _NEXT and (self.unopened or self.bare) and not self.told_unopened:
            self.told_unopened = True  # its closing words came: the unopened call is one
            left = " ".join(self.shape.opening[: self.shape.left_out]) or self.shape.marker
            after = "" if self.bare else " after a closed call"
            self.stream._notice(
                "recovered-unopened-call", f"read a call written{after} without its opening {left}"
            )
        self.state = self.then
        if self.then == _ARGS and self.index < 0:
            self.headed = not self.word_left_out
            if not (self.deferred or self.counter):  # (its words held its id, or it is headed)
                self._announce()
        if self.then == _END:
            if self.left and not self.calls:  # no item was a call: no list of calls
                return self.fail(i, self.left[0][1]), False
            self.status = DONE
            return i, False
        return i, True

    def _call(self, s: str, i: int) -> tuple[int, bool]:
        shape = self.shape
        kind = shape.kind
        if self.primed_start:  # does the reply write the marker the prompt wrote?
            status, j = expect_literal(s, i, shape.marker)
            if status == OPEN:
                return i, False
            self.primed_start = False
            self.primed = status != DONE
            return j, True
        if kind == "code":  # (its white space is the code's)
            return self.code_start(i)
        if s[i] in WS:
            return i + 1, True
        if kind == "name-python" and self.calls and shape.trail and s[i] == shape.trail[0][0]:
            self.words(shape.trail, _END)  # a trailing comma, as Python writes one
            return i, True
        if shape.json_too and kind == "name-python":  # one list, one way (its first says)
            as_json = s[i] == "{"
            if self.list_json is None:
                self.list_json = as_json
            elif as_json != self.list_json:
                return self.fail(i, "a list of calls written both as Python and JSON"), False
        sibling = kind != "json" and self.sibling_json(s, i)  # (a call object: see .jsonsteps)
        if (kind == "json" or sibling or (kind == "tags" and shape.json_too)) and self.list_opens(
            s, i
        ):
            return i + 1, True
        if kind == "json" or sibling or (shape.json_too and s[i] == "{"):
            if s[i] != "{" and kind == "json" and not self.calls:
                went = self._other_form(s, i)  # a form at the same marker written otherwise?
                if went is not None:
                    return i, went
            if s[i] != "{":
                after = self.opened_by.replace(NUMBER, "0")
                self.fail(i, f"no JSON object after {after}")
                if self.listed and not self.stream.strict:
                    lines = not self.shape.next_call
                    return self._left_item(ItemEnd(self.shape.trail[0], lines=lines), i)
                return i, False
            call_shape = shape.call_shape(self.stream.strict, self.stream.tools.known)
            # a family that writes its id after the arguments (Mistral Nemo's list): the
            # call is announced once whole, with the model's id, as peers keep it
            late_id = bool(shape.id_key) and not shape.id_first
            self.json_call = JsonCall(
                self.stream,
                call_shape,
                call_id=self.model_id,
                announce_at_end=late_id,
                told=self.told,
            )
            self.model_id = ""
            self.state = _JSON
        else:
            self.names = Name(self.name_stops, "tool name")
            self.state = _NAME
        return i, True

    def _name(self, s: str, i: int) -> tuple[int, bool]:
        assert self.names is not None
        name, i = self.names.read(self, s, i)
        if name is None:
            return i, False
        tools = self.stream.tools
        # a Python call's name and its parenthesis: it looked like a call (a JSON one always)
        self.looked = self.shape.kind != "name-python" or s[i] == "("
        if self.shape.whole and not self.looked:  # a whole reply's call: a name and its (
            return self.fail(i, "no ( after the name"), False
        if name in self.shape.text_recipients and not tools.has(name):
            self.words(self.shape.name_end, _END)  # what follows is reply text
            return i, True
        # nothing else says it is a call: a declared name must
        guessed = (self.bare and not self.certain) or self.primed or self.shape.whole
        if guessed and tools.known and not tools.has(name):
            return self.fail(i, f"{name!r} is not a declared tool"), False
        self.escaped_newline = False
        if self.shape.kind == "tags":
            typed = bool(self.shape.type_attr or self.shape.type_tag)
            self.call = TextArgs.start(self, name, self.model_id or None, typed)
            self.args_whole = False
            self.model_id = ""
            self.words(self.shape.name_end, _BETWEEN)
        else:
            self.call_name = name
            self.index = -1
            # (else once the id its words hold is read, or its arguments begin: see _then)
            if CALL_ID not in self.shape.name_end and not (self.deferred or self.shape.id_words):
                self._announce()
            if self.shape.kind == "name-python":
                self.py_start()
            elif self.shape.kind == "name-literal":
                dialect = DIALECTS[self.shape.literal]
                lenient = not self.stream.strict
                self.literal = LiteralReader(dialect, self.literal_text, separators=lenient)
                self.arg_text = []
            else:
                self.scanner = scanner = ObjectScanner()
                scanner.raw_controls = not self.stream.strict
                scanner.stops = self.stream.call_stops
            self.words(self.shape.name_end, _ARGS)
        return i, True

    def _announce(self) -> None:
        """Start the call read so far on the stream, with the id its framing gave it."""
        self.index, self.id = self.announce(self.call_name, self.model_id or None)
        self.model_id = ""

    def _args(self, s: str, i: int) -> tuple[int, bool]:
        scanner = self.scanner
        if scanner is None:
            if self.literal is not None:
                return self.literal_args(s, i, _NEXT)
            return self.python_args(s, i, _NEXT)
        if not scanner.parts and s[i] in WS:  # (parts: no join a character)
            return i + 1, True
        if self.index < 0 and not self.counter:  # a deferred call is one once its arguments begin
            if s[i] != "{":
                return self.fail(i, "the arguments are not a JSON object"), False
            self._announce()
        return self._args_read(scanner, scanner.feed(s, i))  # (stops set once: see _name)

    def _args_read(self, scanner: ObjectScanner, i: int) -> tuple[int, bool]:
        """The JSON object of arguments, read up to ``i``: passed on, and ended if over."""
        over = scanner.over
        if over and scanner.failed:
            return self.fail(i, "the arguments are not a JSON object"), False
        if not self.counter:  # (a call named by its arguments is passed on once named)
            self.stream._args(self.index, scanner.piece)
        if scanner.raw_count:
            self.raw_controls.add(self.index)
        if not over:
            return i, False
        text = scanner.text().strip()
        args = self.json_args(text, i)
        if args is None or (self.counter and not self._named_by(args, text, i)):
            return i, False
        self.calls.append((self.index, ToolCall(self.id, self.call_name, args, text)))
        self.words(self.shape.post, _NEXT)
        return i, True
