"""Pieces of call forms that several families' declarations share.

Each family declares its own form (its ``grammar``) in its module, in the vocabulary of
:mod:`toolwire.formats.grammar`, from its own grammar as the module describes it and as its
templates render calls (tests/test_grammars.py proves each on every corpus template of the
family). What several forms are built from is here: a JSON call object, a JSON list of them
after a marker, each call in a pair of tags, the ``<invoke name=…>`` shape and Qwen's
``<function=…><parameter=…>`` body.
"""

from __future__ import annotations

from .grammar import (
    Body,
    CallForm,
    JsonCall,
    Tagged,
    cat,
    lit,
)

__all__ = [
    "CALL_ID",
    "CALL_INDEX",
    "NAME_ARGS",
    "XML_PARAMETERS",
    "json_list",
    "tag_block",
    "xml_invoke",
]

NAME_ARGS = JsonCall()

CALL_INDEX = "[0-9]{1,4}"

CALL_ID = "[A-Za-z0-9_-]{0,40}"


def json_list(marker: str, body: JsonCall = NAME_ARGS, end: str = "") -> CallForm:
    """``marker[{…}, {…}]end``: a JSON list of call objects after a marker."""
    open_ = f'{lit(marker)} space "["'
    close = cat('"]"', lit(end) if end else "")
    return CallForm(body, open=open_, close=close, sep='","', triggers=(marker,))


def tag_block(open_: str, close: str, body: Body) -> CallForm:
    """Each call between ``open_`` and ``close``, the tags repeated for the next call."""
    return CallForm(body, open=lit(open_), close=lit(close), blocks=True, triggers=(open_,))


def xml_invoke(prefix: str, invoke: str, parameter: str, ns: str = "") -> Tagged:
    """``<invoke name="N"><parameter name="K">V</parameter></invoke>`` and its kin."""
    return Tagged(
        before=lit(f'{ns}<{prefix}{invoke} name="'),
        between='"\\">"',
        after=lit(f"{ns}</{prefix}{invoke}>"),
        arg_open=(f'{ns}<{prefix}{parameter} name="{{key}}">',),
        arg_close=(f"{ns}</{prefix}{parameter}>",),
    )


XML_PARAMETERS = Tagged(
    before=lit("<function="),
    between='">"',
    after=lit("</function>"),
    arg_open=("<parameter={key}>",),
    arg_close=("</parameter>",),
)
