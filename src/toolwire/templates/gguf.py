"""The chat template and special tokens from a GGUF file's metadata.

A GGUF file is the model a local engine runs, and its metadata holds the template the model
was trained with; reading it from there (rather than guessing by model name) is what makes
the rendered prompt right. Only metadata is read, by the bounded reader of
:mod:`toolwire.templates.gguf_meta`: the weights are never touched and the vocabulary is
never built (the three or four special tokens are picked out of it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from toolwire.errors import GGUFError
from toolwire.templates.chat import ChatTemplate
from toolwire.templates.gguf_meta import GGUF_MAGIC, GGUFMetadata, read_metadata, type_name

__all__ = ["GGUF_MAGIC", "GGUFInfo", "read_gguf"]

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
    wrong type, a token id outside the vocabulary, a count past the reader's limits) raises
    :class:`GGUFError`.
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            meta = read_metadata(handle, _wanted, source=str(file))
            return _info(file, _Fields(meta))
    except OSError as exc:
        raise GGUFError(f"{file}: cannot open: {exc.strerror or exc}") from exc


def _wanted(key: str) -> bool:
    return key.startswith(_TEMPLATE) or key in _SCALARS


_SCALARS = frozenset(
    {
        "general.name",
        "general.architecture",
        "general.alignment",
        "tokenizer.ggml.model",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    }
)


def _info(file: Path, fields: _Fields) -> GGUFInfo:
    """The info from the fields read (the vocabulary still open, for the special tokens)."""
    templates: dict[str, str] = {}
    for name in fields.strings(_TEMPLATE_NAMES):
        text = fields.string(f"{_TEMPLATE}.{name}")
        if text is not None:
            templates[name] = text
    for key in fields.keys_with_prefix(f"{_TEMPLATE}."):
        templates.setdefault(key[len(_TEMPLATE) + 1 :], fields.string(key) or "")

    ids = {
        role: fields.integer(f"tokenizer.ggml.{role}_token_id")
        for role in ("bos", "eos", "eot", "eom")
    }
    texts = fields.tokens(ids.values())
    bos, eos, eot, eom = (
        "" if ids[role] is None else texts.get(ids[role] or 0, "")
        for role in ("bos", "eos", "eot", "eom")
    )
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


_INTEGERS = frozenset({0, 1, 2, 3, 4, 5, 10, 11})  # the GGUF integer types
_STRING, _ARRAY, _BOOL = 8, 9, 7


class _Fields:
    """Typed access to the metadata read: a field of another type is a :class:`GGUFError`
    naming the key, the type found and the type expected."""

    def __init__(self, meta: GGUFMetadata) -> None:
        self._meta = meta
        self._source = meta.source

    def _error(self, key: str, expected: str) -> GGUFError:
        names = "/".join(type_name(t) for t in self._meta.types[key])
        return GGUFError(f"{self._source}: metadata {key} is {names}, expected {expected}")

    def keys_with_prefix(self, prefix: str) -> list[str]:
        return [key for key in self._meta.types if key.startswith(prefix)]

    def string(self, key: str) -> str | None:
        if key not in self._meta.types:
            return None
        value = self._meta.values.get(key)
        if self._meta.types[key] != (_STRING,) or not isinstance(value, str):
            raise self._error(key, "a string")
        return value

    def strings(self, key: str) -> list[str]:
        types = self._meta.types.get(key)
        if types is None or types == (_ARRAY,):  # an empty array carries no element type
            return []
        value = self._meta.values.get(key)
        if types != (_ARRAY, _STRING):
            raise self._error(key, "an array of strings")
        if not isinstance(value, list):
            raise GGUFError(f"{self._source}: metadata {key} holds too many names to read")
        return [item for item in value if isinstance(item, str)]

    def integer(self, key: str) -> int | None:
        types = self._meta.types.get(key)
        if types is None:
            return None
        value = self._meta.values.get(key)
        if len(types) != 1 or types[0] not in _INTEGERS or not isinstance(value, int):
            raise self._error(key, "an integer")
        return value

    def boolean(self, key: str) -> bool | None:
        types = self._meta.types.get(key)
        if types is None:
            return None
        value = self._meta.values.get(key)
        if types != (_BOOL,) or not isinstance(value, bool):
            raise self._error(key, "a boolean")
        return value

    def tokens(self, token_ids: Iterable[int | None]) -> dict[int, str]:
        """The texts of the tokens ``token_ids`` (None ids skipped), from the vocabulary."""
        wanted = {i for i in token_ids if i is not None}
        if not wanted:
            return {}
        found = self._meta.arrays.get(_TOKENS)
        if found is None:
            first = min(wanted)
            raise GGUFError(f"{self._source}: token id {first} given but {_TOKENS} is missing")
        if self._meta.types[_TOKENS] not in ((_ARRAY, _STRING), (_ARRAY,)):
            raise self._error(_TOKENS, "an array of strings")
        for token_id in sorted(wanted):
            if not 0 <= token_id < found.count:
                raise GGUFError(
                    f"{self._source}: token id {token_id} is outside the vocabulary "
                    f"({found.count} tokens)"
                )
        return self._meta.array_strings(_TOKENS, wanted)
