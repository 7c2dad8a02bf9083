"""A family whose calls are the whole reply, with no marker (``DerivedShape.whole``): the
steps of the engine's stream (a mixin of :class:`~.derivedstream.DerivedStream`).

Llama 3 answers a call with the JSON object alone, Llama 4 with a bare Python list, others
with a bare JSON list. With no marker, a reply that merely starts like one may be meant for
the user, so such a block is read only where it cannot be anything else:

- it opens only where the reply starts (after white space), at its first word (``[``; a
  call object's brace where the form has no words before it; a call's name, only when the
  tools are known and not strict: nothing but a declared name says it is a call);
- when the tools are known, each call must name a declared tool;
- the block must be the whole reply: its calls are held until the reply ends, and text
  after it (but white space and the family's end tokens) makes all of it text — named
  ``call-not-read`` when a call was begun, else given back with no notice
  (``[link](url)`` never looked like a call) — unless, not strict, every call names a
  declared tool and white space sets the text after them apart (not another ``[`` or
  ``{``): then the calls stand and that text is the reply's (``recovered-leading-call``, as
  SGLang reads Llama 3.2's ``{"name": …} Some follow-up text``). Unlike a trailing call
  (below), their arguments need not fit to be read: a block where the reply starts is the
  family's own form, no example quoted in prose, and a call's arguments are checked as
  every call's are, an error the model can act on.

After prose, unless strict, the reply's last block may still be such a call: a ``{`` or
``[`` line, held back while it streams (:class:`~.trailing.TrailingBlock`) and read at the
reply's end as a whole reply, kept only when every call names a declared tool with
arguments that fit its schema (``recovered-trailing-call``). The family's tagged forms (a
marker, ``<|python_tag|>``) are read anywhere as any marker is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .derivedstream import DerivedStream
from .formsteps import NAMED
from .markerstream import FAILED, OPEN, WS, Body, MarkerStream, expect_any
from .trailing import TrailingBlock, end_trailing

if TYPE_CHECKING:
    from .shapereader import DerivedBody

__all__ = ["WholeReply"]


class WholeReply(DerivedStream):
    """The whole-reply steps of the engine's stream: a layer before it, which only a syntax
    with a whole-reply form has (no other pays for its checks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Nothing but white space has come yet: a whole form may still open.
        self._starting = bool(self._whole)
        #: The white space the reply starts with, and a marker's start after it, held (each
        #: piece kept once: a reply of white space costs its length, however it is cut).
        self._lead: list[str] = []
        self._lead_tail = ""
        #: A whole block read, its calls held until the reply ends, with its text; and
        #: the white space (and end tokens) after it, held.
        self._held_block: Body | None = None
        self._held_raw: list[str] = []
        #: The text after it (white space, an end token), each piece kept once; the end
        #: token begun there (no longer than the longest), or whole.
        self._after: list[str] = []
        self._after_token = ""
        self._after_token_whole = False
        self._ended = False
        #: A held block's calls are being released where the reply went on (not held again).
        self._releasing = False
        #: After prose, the reply's last block, held back (see the module's doc).
        self._trail = TrailingBlock() if self._whole and not self.strict else None
        #: No layer above this one reads the stream's content: it may be skipped (_content).
        self._straight = type(self)._content is WholeReply._content

    def _content(self, text: str) -> None:
        if self._held_block is not None:
            text = self._after_whole(text)
            if not text:
                return
        if self._starting:
            text, self._lead_tail = self._lead_tail + text, ""
            j = 0
            while j < len(text) and text[j] in WS:
                j += 1
            self._lead.append(text[:j])
            scanned = self._opening.markers if self._opening is not None else ()
            status = expect_any(text, j, scanned)[0] if scanned and j < len(text) else FAILED
            if j == len(text) or status == OPEN:  # white space, or perhaps a marker: wait
                self._lead_tail = text[j:]  # (a marker's start: no longer than a marker)
                return
            self._starting = False
            lead, text, self._lead = "".join(self._lead), text[j:], []
            j = 0
            # a marker of another form where the reply starts (Mistral's ``[TOOL_CALLS]``
            # beside a bare ``[``): that form's
            form = self._whole.get(text[j]) if status == FAILED else None
            if form is not None and form.repair and (self.strict or not self.tools.known):
                form = None  # (a form read only as a repair, of declared tools: DerivedShape)
            if form is None and NAMED.match(text, j) and self.tools.known and not self.strict:
                form = self._whole.get("")  # a form whose calls begin with their name
            if form is None:
                text = lead + text
            else:
                self.opened_by = form.marker
                self.whole_form = form
                self._body = self.new_body()
                self.whole_form = None
                self._raw = [lead + form.marker]
                text = text[j + len(form.marker) :]
        if self._opening is None and self._body is None:  # no marker opens a call mid-reply
            self._text(self._take_held() + text)
            return
        if self._straight and not self._starting and self._opening is not None:
            # nothing of this layer's is due until a whole block is held (hold_whole): the
            # stream's own reading is called straight from here on, a step less per chunk
            self._content = super()._content  # type: ignore[method-assign]
        super()._content(text)

    def hold_whole(self, body: DerivedBody) -> bool:
        """A whole block is read: hold its calls until the reply ends (True), else False."""
        if self._ended or self._releasing or not body.shape.whole:
            return False
        self._held_block, self._held_raw = body, self._raw
        self.__dict__.pop("_content", None)  # this layer reads what follows (see _content)
        self._body = None
        self._raw = []
        self._diverted = True
        return True

    def _after_whole(self, text: str) -> str:
        """Text after a whole block: white space and end tokens are held; anything else
        makes the block text, and is returned to be read on."""
        self._after.append(text)
        if self._after_token_whole:  # after a whole end token, only white space
            if not text.strip(WS):
                return ""
        else:
            token = self._after_token + (text if self._after_token else text.lstrip(WS))
            if not token:
                return ""
            for end in self.turn_ends:
                if end.startswith(token):  # (no longer than the token)
                    self._after_token = token
                    return ""
                if token.startswith(end) and not token[len(end) :].strip(WS):
                    self._after_token, self._after_token_whole = "", True
                    return ""
        s = "".join(self._after)
        body, self._held_block, self._after = self._held_block, None, []
        assert body is not None
        rest = s.lstrip(WS)
        apart = len(rest) < len(s) and rest[:1] not in ("[", "{")  # prose, set apart
        tools = self.tools
        if (
            apart
            and not self.strict
            and tools.known
            and all(tools.has(c.name) for _, c in body.calls)
        ):
            # the reply opens with calls to declared tools, then prose: the calls stand (their
            # arguments are checked as every call's are), the text after them is the reply's
            self._raw = self._held_raw
            self._releasing = True  # (not held again: see hold_whole)
            self._close(body)
            self._releasing = False
            names = ", ".join(dict.fromkeys(c.name[:100] for _, c in body.calls))[:300]
            self._notice(
                "recovered-leading-call",
                f"read the call to {names} the reply opens with; the text after it is content",
            )
            self._held_raw = []
            return s
        for index, cid in body.started:
            self._abort(index, cid, "text after the calls")
        if body.started:
            opened = self._held_raw[0].lstrip(WS)[:1] if self._held_raw else ""
            self._notice(
                "call-not-read",
                f"text opening with {opened or 'a call'} is not a call (text follows its calls,"
                " which must be the whole reply); it stays reply text",
            )
        self._text("".join(self._held_raw))
        self._held_raw = []
        return s

    def _release_tail(self) -> None:
        if self._trail is not None:  # a call follows: the block held back was prose
            MarkerStream._text(self, self._trail.flush())
        super()._release_tail()

    def _text(self, text: str) -> None:
        if self._trail is not None:
            if self.after_block and text.strip(WS):
                self.after_block = False  # (text the trail holds is text after the block)
            text = self._trail.feed(text)
        super()._text(text)

    def _content_end(self) -> None:
        if self._starting:  # nothing but white space, or a marker's start: read as such
            self._starting = False
            lead = "".join(self._lead) + self._lead_tail
            self._lead, self._lead_tail = [], ""
            if lead:
                self._content(lead)
        self._end_body()
        self._ended = True
        body = self._held_block
        if body is not None:  # the whole block ended the reply: its calls stand
            self._held_block = None
            self._raw = self._held_raw
            self._close(body)
        trail, self._trail = self._trail, None
        if trail is not None:
            end_trailing(self, trail, self._whole_reply)
        self._end_tail()

    def _whole_reply(self) -> DerivedStream:
        """A reader of the held block as a whole reply, with no trailing block of its own."""
        reader = type(self)(self.tools, make_id=self._make_id, strict=self.strict)
        reader._trail = None
        return reader
