"""What the model is given of a turn's messages: the one place, for every API and every
transport, that decides how images, documents and system messages reach it.

Every entrance hands over OpenAI-shaped messages whose content may be a list of Chat
Completions parts: ``text``, ``image_url`` (a URL or a ``data:`` URL), ``file`` (``file_data``
as a ``data:`` URL, or a ``file_id``), ``input_audio``, ``refusal``. :func:`readable` makes
of them what the transport can take:

* **An engine that takes images** (``Transport.takes_images``: an OpenAI-compatible upstream)
  gets them as they are, in user messages. Chat Completions takes images only from the user,
  so the images of a tool result go in the user turn right after the results, each labelled
  with the call it came from, and the tool message keeps its text. Files (a PDF) go the same
  way to an engine that takes them (``takes_files``: OpenAI's own), else as a placeholder.
* **A model that reads text only** (the local engine, a template, Ollama here) gets each image,
  document or sound as a short placeholder it can read —
  ``[image: image/png, 34 KB, not shown: this model reads text only]`` — and every content
  list as one string (text parts joined as templates that walk the parts join them), with a
  ``content-not-seen`` notice saying how many were replaced.
* **An engine that refused them** (a text model behind an OpenAI-compatible server: "image
  input is not supported") is asked again once with the placeholders, before the model said
  a word (:mod:`toolwire.pipeline.reply`), with the same notice.
* **A system message inside the conversation** stays where it is when the model reads it
  there (an engine's own API; a template that renders it in place:
  :func:`~toolwire.templates.roles.system_in_place`). For a template that refuses it or drops
  it, the system messages at the start become one, and each later one is given at the start
  of the next user turn (the last user turn before it, when none follows), marked as a
  system note, with a ``system-moved`` notice.

Nothing is copied that does not change: a data URL passed on is the same string object, so
an image costs its bytes once, whatever the number of messages (the body limit bounds it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import events as ev
from .request import Request

if TYPE_CHECKING:
    from .transport import Transport

__all__ = ["describe", "has_media", "readable"]

#: The longest URL a placeholder repeats.
_URL_SHOWN = 200
_TEXT_ONLY = "not shown: this model reads text only"
_NO_FILES = "not shown: this engine takes no files"


@dataclass
class _Counts:
    """How many parts of each kind were replaced by a placeholder."""

    image: int = 0
    document: int = 0
    audio: int = 0

    def add(self, kind: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)

    def notice(self, model: str, why: str) -> ev.Notice | None:
        said = [
            f"{n} {kind}{'s' if n > 1 else ''}"
            for kind, n in (
                ("image", self.image),
                ("document", self.document),
                ("sound", self.audio),
            )
            if n
        ]
        if not said:
            return None
        return ev.Notice(
            "content-not-seen",
            f"{' and '.join(said)} in the conversation went to {model or 'the model'} as "
            f"placeholders: {why}",
        )


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{round(count / 1024)} KB"
    return f"{count / (1024 * 1024):.1f} MB"


def _data_url(url: str) -> tuple[str, int] | None:
    """A ``data:`` URL's media type and decoded size, read from its head alone (linear)."""
    if not url.startswith("data:"):
        return None
    comma = url.find(",", 0, 300)
    if comma < 0:
        return None
    head = url[5:comma]
    media = head.split(";", 1)[0] or "text/plain"
    payload = len(url) - comma - 1
    size = payload * 3 // 4 if head.endswith(";base64") else payload
    return media[:80], size


def describe(part: Mapping[str, Any], why: str = _TEXT_ONLY) -> tuple[str, str]:
    """A non-text part as the placeholder a model reads, and its kind (``image``,
    ``document``, ``audio``)."""
    kind = part.get("type")
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url", "") if isinstance(image, Mapping) else ""
        data = _data_url(url) if isinstance(url, str) else None
        what = f"{data[0]}, {_size(data[1])}" if data else str(url)[:_URL_SHOWN] or "no URL"
        return f"[image: {what}, {why}]", "image"
    if kind == "file":
        file = part.get("file")
        file = file if isinstance(file, Mapping) else {}
        said = [str(file["filename"])[:120]] if isinstance(file.get("filename"), str) else []
        data = _data_url(file["file_data"]) if isinstance(file.get("file_data"), str) else None
        if data:
            said += [data[0], _size(data[1])]
        elif isinstance(file.get("file_id"), str):
            said.append(f"file {file['file_id'][:80]}")
        return f"[document: {', '.join(said) or 'a file'}, {why}]", "document"
    if kind == "input_audio":
        audio = part.get("input_audio")
        audio = audio if isinstance(audio, Mapping) else {}
        data = audio.get("data")
        size = f", {_size(len(data) * 3 // 4)}" if isinstance(data, str) else ""
        return f"[sound: {str(audio.get('format', 'audio'))[:20]}{size}, {why}]", "audio"
    return f"[{str(kind)[:40]} content, {why}]", "document"


def _text_of(part: Mapping[str, Any]) -> str | None:
    """The text a part holds (a text part's, a refusal's), or None for media."""
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    return None


def _flat(parts: Sequence[Any], counts: _Counts, takes: set[str], why: str) -> str:
    """Parts as one string: text parts joined as they are, each placeholder on a line of its
    own. ``takes`` are part types left out of the string (passed on elsewhere)."""
    pieces: list[str] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        text = _text_of(part)
        if text is None:
            if part.get("type") in takes:
                continue
            text, kind = describe(part, why)
            counts.add(kind)
            if pieces and not pieces[-1].endswith("\n"):
                text = "\n" + text
            text += "\n"
        pieces.append(text)
    return "".join(pieces).strip("\n") if pieces else ""


def _media(parts: Sequence[Any], takes: set[str]) -> list[Mapping[str, Any]]:
    return [p for p in parts if isinstance(p, Mapping) and p.get("type") in takes]


def _content(
    messages: Sequence[Mapping[str, Any]],
    transport: Transport,
    counts: _Counts,
    *,
    text_only: bool = False,
) -> list[Mapping[str, Any]] | None:
    """The messages with their content as the transport takes it; None when nothing changed."""
    takes = set()
    if transport.takes_images and not text_only:
        takes.add("image_url")
    if transport.takes_files and not text_only:
        takes.add("file")
    why = _NO_FILES if takes else _TEXT_ONLY
    out: list[Mapping[str, Any]] = []
    changed = False
    held: list[Mapping[str, Any]] = []  # media of the tool results just read, for the user
    for message in messages:
        content = message.get("content")
        role = message.get("role")
        given = message
        if not isinstance(content, list):
            pass
        elif not takes or role in ("system", "developer"):
            given = {**message, "content": _flat(content, counts, set(), _TEXT_ONLY)}
        elif role == "tool":
            media = _media(content, takes)
            if media:
                label = f"(from the result of call {str(message.get('tool_call_id'))[:80]})"
                held += [{"type": "text", "text": label}, *media]
            given = {**message, "content": _flat(content, counts, takes, why)}
        elif role == "user" and any(
            isinstance(p, Mapping) and _text_of(p) is None and p.get("type") not in takes
            for p in content
        ):
            given = {**message, "content": _kept(content, counts, takes, why)}
        changed = changed or given is not message
        if held and role != "tool":
            if role == "user":
                given = _held_turn(held, given)
            else:
                out.append(_held_turn(held, None))
            held = []
        out.append(given)
    if held:
        out.append(_held_turn(held, None))
    return out if changed else None


def _kept(
    parts: Sequence[Any], counts: _Counts, takes: set[str], why: str
) -> list[Mapping[str, Any]]:
    """A user turn's parts, each one the engine cannot take as a text placeholder."""
    out: list[Mapping[str, Any]] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        if _text_of(part) is None and part.get("type") not in takes:
            text, kind = describe(part, why)
            counts.add(kind)
            out.append({"type": "text", "text": text})
        else:
            out.append(part)
    return out


def _held_turn(media: list[Mapping[str, Any]], user: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The images of tool results as a user turn: before the next user turn's own content,
    when one follows, so the roles still alternate."""
    if user is None:
        return {"role": "user", "content": media}
    own = user.get("content")
    parts = own if isinstance(own, list) else [{"type": "text", "text": str(own or "")}]
    return {**user, "content": [*media, *parts]}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(t for p in content if isinstance(p, Mapping) and (t := _text_of(p)))
    return str(content or "")


def _noted(text: str) -> str:
    return f"<system>\n{text}\n</system>"


def _with_note(message: Mapping[str, Any], notes: list[str], first: bool) -> Mapping[str, Any]:
    """A user message with system notes before (``first``) or after its own content."""
    note = "\n\n".join(_noted(n) for n in notes)
    own = message.get("content")
    if isinstance(own, list):
        part = {"type": "text", "text": note + ("\n\n" if first else "")}
        parts = [part, *own] if first else [*own, {"type": "text", "text": "\n\n" + note}]
        return {**message, "content": parts}
    text = str(own or "")
    return {**message, "content": f"{note}\n\n{text}" if first else f"{text}\n\n{note}"}


def _systems(
    messages: Sequence[Mapping[str, Any]], model: str
) -> tuple[list[Mapping[str, Any]], ev.Notice | None]:
    """System messages only at the start, as one; each later one in a user turn."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in ("system", "developer"):
        lead += 1
    later = [
        i for i in range(lead, len(messages)) if messages[i].get("role") in ("system", "developer")
    ]
    if lead < 2 and not later:
        return list(messages), None
    out: list[Mapping[str, Any]] = []
    if lead:
        texts = [_text(m.get("content")) for m in messages[:lead]]
        out.append({**messages[0], "role": "system", "content": "\n\n".join(texts)})
    pending: list[str] = []
    for message in messages[lead:]:
        if message.get("role") in ("system", "developer"):
            pending.append(_text(message.get("content")))
        elif pending and message.get("role") == "user":
            out.append(_with_note(message, pending, first=True))
            pending = []
        else:
            out.append(message)
    if pending:  # no user turn after them: the last one before, else one of their own
        last = next((i for i in range(len(out) - 1, -1, -1) if out[i].get("role") == "user"), None)
        if last is not None:
            out[last] = _with_note(out[last], pending, first=False)
        else:
            out.append({"role": "user", "content": "\n\n".join(_noted(n) for n in pending)})
    said = []
    if lead > 1:
        said.append(f"the {lead} system messages at its start as one")
    if later:
        said.append(
            f"{len(later)} system message{'s' if len(later) > 1 else ''} inside it in a user "
            "turn, marked as a system note"
        )
    return out, ev.Notice(
        "system-moved",
        f"{model or 'the model'} was given {' and '.join(said)}: its template takes a system "
        "message only at the start",
    )


def has_media(request: Request) -> bool:
    """Does any message hold a part that is not text (an image, a file, a sound)?"""
    return any(
        isinstance(part, Mapping) and _text_of(part) is None
        for m in request.messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
    )


def readable(
    transport: Transport, request: Request, *, text_only: bool = False
) -> tuple[Request, list[ev.Notice]]:
    """``request`` with its messages as ``transport`` can give them to the model (the module
    says how), and the notices that say what was changed; the same request when nothing was.
    ``text_only``: as to a model that reads text only (the engine refused the media)."""
    counts = _Counts()
    messages: Sequence[Mapping[str, Any]] = request.messages
    takes = transport.takes_images and not text_only
    changed = _content(messages, transport, counts, text_only=text_only)
    notices: list[ev.Notice] = []
    if changed is not None:
        messages = changed
    why = (
        "the engine refused them"
        if text_only
        else "the engine takes no files"
        if takes
        else "it reads text only"
    )
    notice = counts.notice(transport.model, why)
    if notice is not None:
        notices.append(notice)
    if not transport.system_in_place():
        moved, said = _systems(messages, transport.model)
        if said is not None:
            messages, changed = moved, moved
            notices.append(said)
    if changed is None:
        return request, notices
    return replace(request, messages=messages), notices
