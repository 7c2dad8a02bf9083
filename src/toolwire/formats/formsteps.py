"""Which of a family's forms a block is read in, where forms share a marker: the steps of
the engine's body (a mixin of :class:`~.shapereader.DerivedBody`) that choose another form
where this one's next word is not there, right after the marker (LFM2's list, or its one
JSON object; a Harmony header with or without ``assistant``) or in the words after a name
(Mistral's ``[CALL_ID]`` or ``[ARGS]``; a Harmony header's ``json``, or none).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .markerstream import DONE, FAILED, OPEN, Body, expect_literal
from .tagsteps import _ARGS, _BETWEEN, _CALL, _LITS
from .textargs import TextArgs

if TYPE_CHECKING:
    from .derived import DerivedShape
    from .derivedstream import DerivedStream

__all__ = ["NAMED", "FormSteps"]

#: The first character of a name written bare (a call of a name kind starts with one).
NAMED = re.compile(r"[A-Za-z_]")


class FormSteps(Body):
    """The form-choosing steps of the engine's body."""

    shape: DerivedShape
    stream: DerivedStream
    todo: list[str]
    then: int
    call: TextArgs | None

    if TYPE_CHECKING:  # the body's own, which this mixin's steps call

        def _use(self, shape: DerivedShape) -> None: ...

        def words(self, words: tuple[str, ...], then: int) -> None: ...

    @property
    def marker_only(self) -> bool:
        """Of the block's opening words, only the marker is read."""
        opening = self.shape.opening
        return self.then == _CALL and self.state == _LITS and self.todo == list(opening[1:])

    def _after_name(self) -> bool:
        """The words after a call's name are due, none of them read yet."""
        if self.then == _BETWEEN:
            return self.call is not None and not self.call.args and self._name_words()
        return self.then == _ARGS and self._name_words()

    def _name_words(self) -> bool:
        return len(self.todo) == len(self.shape.name_end) > 0

    def _other_form(self, s: str, i: int) -> bool | None:
        """Where forms sharing a marker part and this form's next word is not there: the
        first other form whose next word (or payload) is. They part right after the marker
        (LFM2's list, or its one JSON object) or in the words after a name (Mistral's id
        before ``[ARGS]``, or none). True when one is read from here, False to wait, None
        when none is."""
        shape = self.shape
        if self.then == _ARGS and self.todo:
            return self._other_name_end(s, i)
        if self.todo != list(shape.opening[1:]) or self.then != _CALL:
            return None
        waiting = False
        for form in self.stream.forms_of(shape.marker):
            if form is shape:
                continue
            if len(form.opening) > 1:
                status, _j = expect_literal(s, i, form.opening[1])
            elif form.kind == "json":  # (a list of call objects too: see .jsonsteps)
                listed = s[i] == "[" and not self.stream.strict
                status = DONE if s[i] == "{" or listed else FAILED
            else:  # a name, or a call object where the name is due (see .jsonsteps)
                sibling = s[i] == "{" and not (self.stream.strict or form.json_too)
                status = DONE if NAMED.match(s, i) or sibling else FAILED
            if status == DONE:
                self._use(form)
                self.stream.last = form
                return True
            waiting = waiting or status == OPEN
        return False if waiting else None

    def _other_name_end(self, s: str, i: int) -> bool | None:
        """:meth:`_other_form` in the words after a name (a form written alike up to here)."""
        shape = self.shape
        read = len(shape.name_end) - len(self.todo)
        waiting = False
        for form in self.stream.forms_of(shape.marker):
            alike = form.kind == shape.kind and form.opening == shape.opening
            if form is shape or not alike or form.name_end[:read] != shape.name_end[:read]:
                continue
            if len(form.name_end) > read:
                status, _j = expect_literal(s, i, form.name_end[read])
            else:  # the form's words end here: its arguments follow
                status = DONE if s[i] == ("(" if form.kind == "name-python" else "{") else FAILED
            if status == DONE:
                self._use(form)
                self.words(form.name_end[read:], _ARGS)
                return True
            waiting = waiting or status == OPEN
        return False if waiting else None
