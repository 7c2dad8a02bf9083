"""Shared fixtures: the real local models.

A test that needs a real model fails under CI (``CI`` set), where the models are installed
and a skip would hide a broken install; elsewhere it is skipped, with the install command.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolwire.errors import ModelNotFoundError
from toolwire.models import QWEN25_CODER_15B, default_model_path, smollm2_path


def _model(find: Callable[[], Path]) -> Path:
    try:
        return find()
    except ModelNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"real model missing under CI: {exc}")
        pytest.skip(f"real model not installed: {exc}")


@pytest.fixture(scope="session")
def qwen_gguf() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the default local model (has a tool template)."""
    return _model(default_model_path)


@pytest.fixture(scope="session")
def qwen15_gguf() -> Path:
    """Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the larger choice (the ``model-1-5b`` extra)."""
    return _model(QWEN25_CODER_15B.path)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct Q4_1 (plain ChatML, no tool template)."""
    return _model(smollm2_path)


def _need_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-python missing under CI: {exc}")
        pytest.skip("llama-cpp-python not installed: pip install 'toolwire[local]'")


@pytest.fixture(scope="session")
def local_gguf(qwen_gguf: Path) -> Path:
    """The default model's file, for a test that runs ``toolwire`` on it in a subprocess:
    the model and the in-process engine are both there (under CI, a test fails otherwise)."""
    _need_llama_cpp()
    return qwen_gguf


@pytest.fixture(scope="session")
def llama_backend(qwen_gguf: Path) -> object:
    """The default model in-process (llama-cpp-python, the ``local`` extra)."""
    _need_llama_cpp()
    from toolwire.backends.llamacpp import LlamaCppBackend

    return LlamaCppBackend(qwen_gguf, n_ctx=2048, n_threads=2)


@pytest.fixture
def fresh_llama_backend(llama_backend: Any) -> Any:
    """The default model with an empty KV cache, for tests that pin what it writes.

    llama-cpp-python evaluates only the part of a prompt that differs from the previous one,
    and that changes the numbers slightly: a reply at temperature 0 then depends on what ran
    before it. Emptying the cache first makes it depend on the request alone.
    """
    llama_backend.llama.reset()
    return llama_backend
