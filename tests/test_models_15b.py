"""The real Qwen2.5-Coder-1.5B-Instruct: assembled from its 22 installed packages, verified, and
loaded by name.

Under CI (``CI`` set) a missing package fails these tests; elsewhere they are skipped with the
command that installs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from toolwire.cli import main
from toolwire.models import QWEN25_CODER_15B

NAME = "qwen2.5-coder-1.5b"


def _require_parts() -> None:
    if QWEN25_CODER_15B.status().state == "missing":
        why = f"the 1.5B model's packages are not installed: {QWEN25_CODER_15B.install}"
        if os.environ.get("CI"):
            pytest.fail(f"real model missing under CI: {why}")
        pytest.skip(why)


def test_the_22_parts_assemble_into_the_pinned_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the installed packages into an empty cache: joined in order, hashed, stamped."""
    monkeypatch.setenv("TOOLWIRE_CACHE_DIR", str(tmp_path))
    _require_parts()
    assert QWEN25_CODER_15B.status() == ("installed", None)
    path = QWEN25_CODER_15B.path()
    assert path == tmp_path / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert path.stat().st_size == 1_117_320_768
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    stamp = json.loads(path.with_name(path.name + ".stamp.json").read_text())
    assert stamp["sha256"] == QWEN25_CODER_15B.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".stamp.json"]
    # the parts' own bytes, hashed here apart from the code under test, give that digest
    digest = hashlib.sha256()
    for package, resource in QWEN25_CODER_15B.parts:
        found = next(
            Path(p) / package / resource
            for p in sys.path
            if (Path(p) / package / resource).is_file()
        )
        with found.open("rb") as part:
            while chunk := part.read(1 << 22):
                digest.update(chunk)
    assert digest.hexdigest() == QWEN25_CODER_15B.sha256
    assert QWEN25_CODER_15B.status() == ("verified", path)
    path.unlink()  # pytest keeps recent temporary directories: not 1.1 GB of them


def test_detect_reads_the_1_5b_template_by_name(
    qwen15_gguf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["detect", "--json", NAME]) == 0
    first, _, rest = capsys.readouterr().out.partition("\n")
    assert first == "hermes"  # Qwen2.5's template, calls in <tool_call> JSON
    assert json.loads(rest)["source"] == str(qwen15_gguf)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_serve_loads_the_1_5b_by_name_and_answers(qwen15_gguf: Path) -> None:
    """``toolwire serve --model qwen2.5-coder-1.5b``: the name resolves to the verified file,
    the in-process engine loads it and it writes a few tokens (about 15 seconds here)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed: toolwire[local]")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "toolwire", "serve", "--model", NAME, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the gateway did not come up in 60 s"
            time.sleep(0.2)
        models = httpx.get(f"{url}/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == [qwen15_gguf.stem]
        body = {
            "model": qwen15_gguf.stem,
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 4,
            "temperature": 0,
        }
        reply = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).json()
        assert reply["usage"]["completion_tokens"] >= 1
        assert reply["choices"][0]["message"]["content"].strip()
    finally:
        server.terminate()
        server.wait(timeout=30)
