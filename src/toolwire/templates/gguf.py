"""The chat template and special tokens from a GGUF file's metadata.

A GGUF file is the model a local engine runs, and its metadata holds the template the model
was trained with; reading it from there (rather than guessing by model name) is what makes
the rendered prompt right. Only metadata is read: ``gguf.GGUFReader`` memory-maps the file,
so the weights are never loaded, though it does parse every metadata field, including the
whole vocabulary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire.errors import GGUFError
from toolwire.templates.chat import ChatTemplate

__all__ = ["GGUF_MAGIC", "GGUFInfo", "read_gguf"]

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"

_TEMPLATE = "tokenizer.chat_template"
_TEMPLATE_NAMES = "tokenizer.chat_templates"
_TOKENS = "tokenizer.ggml.tokens"


@dataclass(frozen=True)
class GGUFInfo:
    """What toolwire needs from a GGUF file to render prompts for it.

    ``templates`` holds the named template variants (``tool_use`` above all: Hermes 3 and
    Command R keep their tool template there). ``end_tokens`` are the texts of the eos, eot
    and eom tokens, the tokens a generator stops on. ``add_bos`` says whether the engine
    prepends bos itself (then a template's own ``{{ bos_token }}`` would double it).
    """

    path: Path
    name: str
    architecture: str
    chat_template: str | None
    templates: dict[str, str] = field(default_factory=dict)
    bos_token: str = ""
    eos_token: str = ""
    end_tokens: tuple[str, ...] = ()
    add_bos: bool = False

    def template(self) -> ChatTemplate:
        """The file's chat template, with its ``tool_use`` variant for renders with tools."""
        if self.chat_template is None:
            raise GGUFError(f"{self.path}: the file has no chat template ({_TEMPLATE})")
        return ChatTemplate(
            self.chat_template,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            end_tokens=self.end_tokens,
            tool_source=self.templates.get("tool_use"),
            name=self.name or self.path.stem,
        )


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read a GGUF file's chat template(s) and special tokens, not its weights.

    Every failure (a missing file, a file that is not GGUF, a truncated one, a field of the
    wrong type, a token id outside the vocabulary) raises :class:`GGUFError`.
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise GGUFError(f"{file}: cannot open: {exc.strerror or exc}") from exc
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{file}: not a GGUF file (starts with {magic!r}, not {GGUF_MAGIC!r})")

    from gguf import GGUFReader  # imported here: it pulls in numpy, which only this needs

    try:
        reader = GGUFReader(file)
    except Exception as exc:  # a third-party parser on untrusted bytes: any failure is ours
        raise GGUFError(f"{file}: cannot read GGUF metadata ({type(exc).__name__}: {exc})") from exc
    fields = _Fields(file, reader.fields)
    del reader  # drops the memory map once the fields below are read

    templates: dict[str, str] = {}
    for name in fields.strings(_TEMPLATE_NAMES):
        text = fields.string(f"{_TEMPLATE}.{name}")
        if text is not None:
            templates[name] = text
    for key in fields.keys_with_prefix(f"{_TEMPLATE}."):
        templates.setdefault(key[len(_TEMPLATE) + 1 :], fields.string(key) or "")

    bos = fields.token(fields.integer("tokenizer.ggml.bos_token_id"))
    eos = fields.token(fields.integer("tokenizer.ggml.eos_token_id"))
    eot = fields.token(fields.integer("tokenizer.ggml.eot_token_id"))
    eom = fields.token(fields.integer("tokenizer.ggml.eom_token_id"))
    add_bos = fields.boolean("tokenizer.ggml.add_bos_token")
    if add_bos is None:
        # llama.cpp's default when the key is absent: SentencePiece vocabularies add bos.
        add_bos = fields.string("tokenizer.ggml.model") == "llama"
    return GGUFInfo(
        path=file,
        name=fields.string("general.name") or "",
        architecture=fields.string("general.architecture") or "",
        chat_template=fields.string(_TEMPLATE),
        templates=templates,
        bos_token=bos,
        eos_token=eos,
        end_tokens=tuple(dict.fromkeys(t for t in (eos, eot, eom) if t)),
        add_bos=add_bos,
    )


class _Fields:
    """Typed access to ``GGUFReader.fields``.

    Reads the reader's ``parts``/``data``/``types`` directly rather than
    ``ReaderField.contents()``, which older ``gguf`` releases lack.
    """

    def __init__(self, file: Path, fields: Any) -> None:
        from gguf import GGUFValueType

        self._file = file
        self._fields = fields
        self._types = GGUFValueType
        self._integers = {
            GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
            GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64,
        }  # fmt: skip

    def _error(self, key: str, expected: str, types: Any) -> GGUFError:
        names = "/".join(getattr(t, "name", str(t)) for t in types) or "empty"
        return GGUFError(f"{self._file}: metadata {key} is {names}, expected {expected}")

    def keys_with_prefix(self, prefix: str) -> list[str]:
        return [key for key in self._fields if key.startswith(prefix)]

    def _text(self, key: str, raw: Any) -> str:
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFError(f"{self._file}: metadata {key} is not valid UTF-8") from exc

    def string(self, key: str) -> str | None:
        found = self._fields.get(key)
        if found is None:
            return None
        if list(found.types) != [self._types.STRING]:
            raise self._error(key, "a string", found.types)
        return self._text(key, found.parts[-1])

    def strings(self, key: str) -> list[str]:
        found = self._fields.get(key)
        if found is None:
            return []
        types = list(found.types)
        if types == [self._types.ARRAY]:  # an empty array carries no element type
            return []
        if types != [self._types.ARRAY, self._types.STRING]:
            raise self._error(key, "an array of strings", found.types)
        return [self._text(key, found.parts[index]) for index in found.data]

    def integer(self, key: str) -> int | None:
        found = self._fields.get(key)
        if found is None:
            return None
        if len(found.types) != 1 or found.types[0] not in self._integers:
            raise self._error(key, "an integer", found.types)
        return int(found.parts[-1][0])

    def boolean(self, key: str) -> bool | None:
        found = self._fields.get(key)
        if found is None:
            return None
        if list(found.types) != [self._types.BOOL]:
            raise self._error(key, "a boolean", found.types)
        return bool(found.parts[-1][0])

    def token(self, token_id: int | None) -> str:
        """The text of token ``token_id`` (``""`` for no id)."""
        if token_id is None:
            return ""
        found = self._fields.get(_TOKENS)
        if found is None:
            raise GGUFError(f"{self._file}: token id {token_id} given but {_TOKENS} is missing")
        if list(found.types) not in ([self._types.ARRAY, self._types.STRING], [self._types.ARRAY]):
            raise self._error(_TOKENS, "an array of strings", found.types)
        if not 0 <= token_id < len(found.data):
            raise GGUFError(
                f"{self._file}: token id {token_id} is outside the vocabulary "
                f"({len(found.data)} tokens)"
            )
        return self._text(_TOKENS, found.parts[found.data[token_id]])
