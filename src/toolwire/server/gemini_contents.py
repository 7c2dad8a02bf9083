"""A Gemini request's ``contents`` (and ``systemInstruction``) read into the Chat Completions
messages every API's turn is made of.

A part holds one of ``text`` (``thought: true``: the model's own reasoning, given back to it
as ``reasoning_content``; a user's thought parts are not the model's and are left out),
``inlineData`` or ``fileData`` (an image part, a file, or for a file not an image at a URI
a line naming it), ``functionCall`` (a ``model`` content's), ``functionResponse`` (a
``user`` content's), ``executableCode`` and ``codeExecutionResult`` (as text). A part with
none of them (``{}``, a number for ``text``), a call in a user's content or a result in the
model's is refused, naming the part: a request must never reach the model emptied.
``thoughtSignature`` s are the maker's and are dropped.

Results are matched to their calls by id or by name and order (:class:`_Calls`); each call
without an id is given one, ``gemini-{content}-{part}``. Counting a request's tokens
(``countTokens``) takes a result that answers no call in the request, as Gemini CLI counts a
turn's parts alone: it is given as text.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from .core import dumps
from .validate import Origins, RequestError

__all__ = ["read_contents"]

#: What one part may hold (exactly one of them), beside its metadata.
_DATA = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)
_MIME = re.compile(r"[A-Za-z0-9][\w.+-]{0,63}/[A-Za-z0-9][\w.+-]{0,127}")


class _Calls:
    """The conversation's calls not yet answered, to match each result to its call by id
    or by name and order: each lookup in constant time, amortised, so a request of many
    calls is read in linear time."""

    def __init__(self) -> None:
        self._made: dict[str, str] = {}  # id -> where the call stands
        self._open: dict[str, str] = {}  # id -> name, the calls not yet answered
        self._by_name: dict[str, deque[str]] = {}  # name -> ids in the order made

    def made_call(self, cid: str, name: str, at: str) -> None:
        if cid in self._made:
            raise RequestError(
                f"'{at}.id' {cid[:80]!r} is the id of an earlier call ({self._made[cid]}): "
                "each call's id must be unique in the conversation",
                f"{at}.id",
            )
        self._made[cid] = at
        self._open[cid] = name
        self._by_name.setdefault(name, deque()).append(cid)

    def answer(self, cid: Any, name: str) -> str | None:
        if isinstance(cid, str) and cid in self._open:
            del self._open[cid]  # (its place in its name's queue is skipped when reached)
            return cid
        queue = self._by_name.get(name)
        while queue:
            known = queue.popleft()
            if self._open.get(known) == name:
                del self._open[known]
                return known
        return None


def _kind(part: Any, at: str) -> str | None:
    """What a part holds (None: only metadata, a thought signature); refused when it holds
    nothing a model can read, or a ``text`` that is no text."""
    if not isinstance(part, dict):
        raise RequestError(f"'{at}' must be a part object", at)
    kinds = [k for k in _DATA if k in part]
    if len(kinds) > 1:
        raise RequestError(f"'{at}' holds {' and '.join(kinds)}: a part holds one of them", at)
    if not kinds:
        if "thoughtSignature" in part:
            return None
        raise RequestError(f"'{at}' must hold one of {', '.join(_DATA)}", at)
    if kinds[0] == "text" and not isinstance(part["text"], str):
        raise RequestError(f"'{at}.text' must be a string", f"{at}.text")
    return kinds[0]


def _name(value: Any, at: str) -> str:
    name = value.get("name") if isinstance(value, dict) else None
    if not isinstance(name, str) or not name:
        raise RequestError(f"'{at}.name' must be a non-empty string", f"{at}.name")
    return name


def _media(part: dict[str, Any], kind: str, at: str) -> dict[str, Any]:
    """An ``inlineData`` or ``fileData`` part as a Chat Completions part."""
    given = part[kind]
    if not isinstance(given, dict):
        raise RequestError(f"'{at}.{kind}' must be an object", f"{at}.{kind}")
    mime = given.get("mimeType")
    if mime is not None and (not isinstance(mime, str) or not _MIME.fullmatch(mime)):
        raise RequestError(f"'{at}.{kind}.mimeType' must be a media type", f"{at}.{kind}.mimeType")
    if kind == "inlineData":
        data = given.get("data")
        if mime is None or not isinstance(data, str):
            raise RequestError(
                f"'{at}.inlineData' must have a mimeType and base64 data", f"{at}.inlineData"
            )
        url = f"data:{mime};base64,{data}"
        if mime.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    uri = given.get("fileUri")
    if not isinstance(uri, str) or not uri:
        raise RequestError(f"'{at}.fileData.fileUri' must be a URI", f"{at}.fileData.fileUri")
    if isinstance(mime, str) and mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": uri}}
    return {"type": "text", "text": f"[file at {uri[:2000]}]"}


def _code(part: dict[str, Any], kind: str) -> str:
    """Code the model ran (``executableCode``) or what it printed, as text."""
    given = part[kind] if isinstance(part[kind], dict) else {}
    if kind == "executableCode":
        language = str(given.get("language", "")).lower()
        return f"```{language}\n{given.get('code', '')}\n```"
    return f"output: {given.get('output', '')}"


def _result(response: Any) -> str:
    """A ``functionResponse.response`` as the tool's result: its ``output`` (or ``error``)
    when that is all it says, as Gemini's clients put it, else its JSON."""
    if isinstance(response, dict) and len(response) == 1:
        ((key, value),) = response.items()
        if key in ("output", "result", "content") and isinstance(value, str):
            return value
        if key == "error" and isinstance(value, str):
            return f"error: {value}"
    return dumps(response)


def _model(parts: list[Any], where: str, i: int, calls: _Calls) -> tuple[dict[str, Any], list[str]]:
    """A ``model`` content as an assistant message, and each call's path (for errors)."""
    text: list[str] = []
    thought: list[str] = []
    wire: list[dict[str, Any]] = []
    paths: list[str] = []
    for j, part in enumerate(parts):
        at = f"{where}[{j}]"
        kind = _kind(part, at)
        if kind == "functionCall":
            call = part["functionCall"]
            name = _name(call, f"{at}.functionCall")
            args = call.get("args", {})
            if not isinstance(args, dict):
                raise RequestError(
                    f"'{at}.functionCall.args' must be an object", f"{at}.functionCall.args"
                )
            given = call.get("id")
            cid = given if isinstance(given, str) and given else f"gemini-{i}-{j}"
            calls.made_call(cid, name, f"{at}.functionCall")
            paths.append(f"{at}.functionCall")
            function = {"name": name, "arguments": dumps(args)}
            wire.append({"id": cid, "type": "function", "function": function})
        elif kind == "text":
            (thought if part.get("thought") is True else text).append(part["text"])
        elif kind in ("executableCode", "codeExecutionResult"):
            text.append(_code(part, kind))
        elif kind is not None:
            raise RequestError(f"'{at}' must not be a {kind} part in a model content", at)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if wire:
        message["tool_calls"] = wire
    if thought:
        message["reasoning_content"] = "\n\n".join(thought)
    return message, paths


def _user(
    parts: list[Any], where: str, calls: _Calls, origins: Origins, at: int, counting: bool
) -> list[dict[str, Any]]:
    """A ``user`` content: its function responses first (as ``tool`` messages, each matched
    to its call; the first of them message ``at``), then its text and media."""
    results: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for j, part in enumerate(parts):
        here = f"{where}[{j}]"
        kind = _kind(part, here)
        if kind == "functionResponse":
            given = part["functionResponse"]
            name = _name(given, f"{here}.functionResponse")
            answer = _result(given.get("response", {}))
            cid = calls.answer(given.get("id"), name)
            if cid is None and counting:  # a turn's parts counted alone
                content.append({"type": "text", "text": f"[{name} returned] {answer}"})
                continue
            if cid is None:
                raise RequestError(
                    f"'{here}.functionResponse' answers no call: the model made no call of "
                    f"{name[:80]!r} that is not answered already",
                    f"{here}.functionResponse",
                )
            origins.results[at + len(results)] = f"{here}.functionResponse"
            results.append({"role": "tool", "tool_call_id": cid, "content": answer})
        elif kind == "text":
            if part.get("thought") is not True:
                content.append({"type": "text", "text": part["text"]})
        elif kind in ("inlineData", "fileData"):
            content.append(_media(part, kind, here))
        elif kind in ("executableCode", "codeExecutionResult"):
            content.append({"type": "text", "text": _code(part, kind)})
        elif kind is not None:
            raise RequestError(f"'{here}' must not be a {kind} part in a user content", here)
    if content:
        texts = all(p["type"] == "text" for p in content)
        joined = "\n".join(p["text"] for p in content) if texts else content
        results.append({"role": "user", "content": joined})
    return results


def _system(given: Any) -> str:
    """``systemInstruction``: a content's text parts (or a string) as one text."""
    if isinstance(given, str):
        return given
    parts = given.get("parts")
    if not isinstance(parts, list):
        raise RequestError(
            "'systemInstruction.parts' must be a list of text parts", "systemInstruction.parts"
        )
    out = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("text"), str):
            at = f"systemInstruction.parts[{j}]"
            raise RequestError(f"'{at}' must be a text part", at)
        out.append(part["text"])
    return "\n".join(out)


def read_contents(
    contents: Sequence[Any], system: Any, origins: Origins, counting: bool = False
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages, where each call and result stands kept
    in ``origins``; ``counting``: only its tokens are wanted (see the module)."""
    out: list[dict[str, Any]] = []
    if system is not None:
        text = _system(system)
        if text:
            out.append({"role": "system", "content": text})
    calls = _Calls()
    for i, given in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(given, dict):
            raise RequestError(f"'{where}' must be a content object", where)
        role = given.get("role") or "user"
        if role not in ("user", "model", "function", "tool"):
            raise RequestError(f"'{where}.role' must be user or model", f"{where}.role")
        parts = given.get("parts")
        if not isinstance(parts, list) or not parts:
            raise RequestError(
                f"'{where}.parts' must be a non-empty list of parts", f"{where}.parts"
            )
        if role == "model":
            message, paths = _model(parts, f"{where}.parts", i, calls)
            if len(message) == 2 and message["content"] is None:
                continue  # thought signatures alone: nothing the model said
            for j, path in enumerate(paths):
                origins.calls[(len(out), j)] = path
            out.append(message)
        else:
            out += _user(parts, f"{where}.parts", calls, origins, len(out), counting)
    if all(m["role"] == "system" for m in out):
        raise RequestError(
            "'contents' holds nothing for the model: give it a user's text, media or a "
            "function's response",
            "contents",
        )
    return out
