"""The gateway's API keys: several, each with a name, the name owning what its key stores.

A client sends its key as ``Authorization: Bearer KEY`` (any case of ``bearer``, as HTTP
schemes are case-insensitive) or as ``x-api-key: KEY`` (the Anthropic client's header). The
name of the key is the *owner* of every response it stores (:mod:`toolwire.server.remember`):
one key can never read, continue or delete another's. A gateway with no keys has one owner,
``""``.

Keys come from a file of lines, ``name key`` or ``name:key`` (``#`` starts a comment; blank
lines are skipped), from ``$TOOLWIRE_API_KEYS`` (such a file's path, or the lines
themselves) or ``$TOOLWIRE_API_KEY`` (one key, named ``default``) so that no key need be on
a command line, where ``ps`` shows it, and from ``--api-key`` (one key, named ``default``).
A line may end with the word ``operator`` (``name key operator``): that key may also read
what is the operator's alone, ``/metrics``. A key given alone (``--api-key``,
``$TOOLWIRE_API_KEY``) is the gateway's one key, and its operator's. A bad line is named by
its number, never by the key it holds; two keys of one name, or one key under two names, are
refused. Reading and joining keys is linear in their number (10,000 keys load in a fraction
of a second).

A key sent is found by a keyed hash of its SHA-256 digest (an HMAC under a secret drawn when
the keys are read, so a lookup's time follows values no client can compute), then compared
with the digest found in constant time (:func:`secrets.compare_digest`): neither the time a
refusal takes nor its answer tells how much of a key was right, and the time of a lookup
does not grow with the number of keys.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError

__all__ = ["DEFAULT_NAME", "KEYS_ENV", "KEY_ENV", "OPERATOR", "Keys"]

#: The name of a key given alone (``--api-key``, ``$TOOLWIRE_API_KEY``).
DEFAULT_NAME = "default"
#: One key, named ``default``.
KEY_ENV = "TOOLWIRE_API_KEY"
#: A keys file's path, or its lines.
KEYS_ENV = "TOOLWIRE_API_KEYS"
#: The word that ends the line of a key that may read ``/metrics``.
OPERATOR = "operator"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
#: A key is visible ASCII, as a header value carries it.
_KEY = re.compile(r"[\x21-\x7e]{1,512}")
#: A keys file is read only this far: it holds keys, not data.
_MAX_FILE = 1024 * 1024
_MAX_KEYS = 10_000


def _digest(key: str | bytes) -> bytes:
    return hashlib.sha256(key.encode() if isinstance(key, str) else key).digest()


def _is_file(text: str) -> bool:
    """Whether one line names a file. A line too long to be a path (a long key's line)
    names none: its OSError, which would show the line, is not raised."""
    try:
        return Path(text).expanduser().is_file()
    except (OSError, RuntimeError, ValueError):  # RuntimeError: ~user of no such user
        return False


@dataclass(frozen=True)
class Keys:
    """The keys a gateway takes, by name (none: every client is let in, as one owner)."""

    #: (name, the key's SHA-256 digest), in the order given.
    entries: tuple[tuple[str, bytes], ...] = ()
    #: The names of the keys that may read what is the operator's (``/metrics``).
    operators: frozenset[str] = frozenset()
    #: The secret of the lookup's keyed hash, and each key's (name, digest) by it.
    _secret: bytes = field(
        default_factory=lambda: secrets.token_bytes(32), repr=False, compare=False
    )
    _index: dict[bytes, tuple[str, bytes]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, digest in self.entries:
            self._index[self._tag(digest)] = (name, digest)

    def _tag(self, digest: bytes) -> bytes:
        return hmac.new(self._secret, digest, hashlib.sha256).digest()

    @classmethod
    def of(cls, named: Mapping[str, str]) -> Keys:
        """Keys from ``{name: key}`` (each checked as a file's line would be)."""
        lines = [f"{name} {key}" for name, key in named.items()]
        return cls.parse("\n".join(lines), "the keys")

    @classmethod
    def single(cls, key: str, name: str = DEFAULT_NAME) -> Keys:
        """One key (``--api-key``): the gateway's one key, its operator's too."""
        if not _KEY.fullmatch(key):
            raise UsageError("an API key must be 1 to 512 visible ASCII characters, without spaces")
        return cls(((name, _digest(key)),), frozenset({name}))

    @classmethod
    def parse(cls, text: str, where: str) -> Keys:
        """Keys from lines of ``name key`` or ``name:key``, each perhaps ending with
        ``operator``; ``where`` names them in errors (a file, a variable), which give a
        line's number and never its key."""
        entries: list[tuple[str, bytes]] = []
        operators: set[str] = set()
        names: dict[str, int] = {}
        digests: dict[bytes, int] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            found = re.match(r"([^\s:]*)\s*[:\s]\s*(.*)", line)
            name, key = (found.group(1), found.group(2).strip()) if found else (line, "")
            at = f"{where}, line {number}"
            words, role = key.split(), ""
            if len(words) == 2 and words[1] == OPERATOR:
                key, role = words[0], OPERATOR
            if key and not _NAME.fullmatch(name):
                raise UsageError(
                    f"{at}: a line is 'name key' or 'name:key', the name of letters, digits "
                    "and _.@- (at most 64)"
                )
            if not key:  # a key alone, perhaps: never echoed
                raise UsageError(f"{at}: a line is 'name key' or 'name:key'; this one has one word")
            if not _KEY.fullmatch(key):
                raise UsageError(
                    f"{at}: the key of {name!r} must be 1 to 512 visible ASCII characters, "
                    "without spaces"
                )
            if name in names:
                raise UsageError(f"{at}: the name {name!r} is given twice (line {names[name]})")
            digest = _digest(key)
            if digest in digests:
                raise UsageError(f"{at}: this key is given twice (line {digests[digest]})")
            if len(entries) >= _MAX_KEYS:
                raise UsageError(f"{at}: more than {_MAX_KEYS} keys")
            names[name], digests[digest] = number, number
            entries.append((name, digest))
            if role:
                operators.add(name)
        if not entries:
            raise UsageError(f"{where} holds no key: give lines of 'name key'")
        return cls(tuple(entries), frozenset(operators))

    @classmethod
    def read(cls, path: str | Path, where: str | None = None) -> Keys:
        """Keys from a file of lines (see :meth:`parse`)."""
        where = where or str(path)
        try:
            with Path(path).expanduser().open("rb") as f:
                data = f.read(_MAX_FILE + 1)
        except OSError as exc:
            raise UsageError(f"{where} cannot be read: {exc.strerror}") from None
        if len(data) > _MAX_FILE:
            raise UsageError(f"{where} is larger than {_MAX_FILE} bytes: it should hold keys")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{where} is not UTF-8 text") from None
        return cls.parse(text, where)

    @classmethod
    def given(
        cls,
        api_key: str | None = None,
        api_keys: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Keys:
        """The keys ``serve`` takes: ``--api-key`` and ``--api-keys FILE``; when neither is
        given, ``$TOOLWIRE_API_KEY`` and ``$TOOLWIRE_API_KEYS`` (a file's path, or the lines
        themselves). Every source given is joined (a name or key twice is refused)."""
        parts: list[Keys] = []
        if api_key is not None or api_keys is not None:
            if api_key is not None:
                parts.append(cls.single(api_key))
            if api_keys is not None:
                parts.append(cls.read(api_keys, f"--api-keys {api_keys}"))
            return cls.joined(parts)
        env = environ or {}
        single, many = env.get(KEY_ENV), env.get(KEYS_ENV)
        if single:
            parts.append(cls.single(single))
        if many:
            text = many.strip()
            if "\n" not in text and _is_file(text):
                parts.append(cls.read(text, f"${KEYS_ENV} ({text})"))
            else:
                parts.append(cls.parse(many, f"${KEYS_ENV}"))
        return cls.joined(parts)

    @classmethod
    def joined(cls, parts: Iterable[Keys]) -> Keys:
        """The keys of every part; a name or a key in two of them is refused (each looked
        up in a set: linear in the keys)."""
        entries: list[tuple[str, bytes]] = []
        operators: set[str] = set()
        names: set[str] = set()
        digests: set[bytes] = set()
        for part in parts:
            for name, digest in part.entries:
                if name in names:
                    raise UsageError(f"the key name {name!r} is given twice")
                if digest in digests:
                    raise UsageError(f"the key named {name!r} is also given under another name")
                names.add(name)
                digests.add(digest)
                entries.append((name, digest))
            operators |= part.operators
        return cls(tuple(entries), frozenset(operators))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def names(self) -> list[str]:
        return [name for name, _ in self.entries]

    def owner(self, authorization: str = "", x_api_key: str = "") -> str | None:
        """The name of the key a request sent (its ``Authorization`` and ``x-api-key``
        headers), ``""`` when the gateway has no keys, None when it sent none of them."""
        if not self.entries:
            return ""
        sent: list[str] = []
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            sent.append(token.strip())
        if x_api_key.strip():
            sent.append(x_api_key.strip())
        found: str | None = None
        for key in sent[:2]:
            digest = _digest(key[:1024])
            name, known = self._index.get(self._tag(digest), ("", b""))
            if secrets.compare_digest(digest, known or bytes(len(digest))) and found is None:
                found = name
        return found

    def operator(self, name: str | None) -> bool:
        """Whether the key named ``name`` (as :meth:`owner` gave it) may read what is the
        operator's: a key marked ``operator``; any client when the gateway has no keys."""
        if not self.entries:
            return name == ""
        return name is not None and name in self.operators
