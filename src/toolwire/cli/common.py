"""What the commands share: reading JSON files, printing JSON, the templates and models an
argument names, and the backend a command's flags name.

Below every command module and importing nothing heavy at load (each import that costs is
made inside the function that needs it), so that building the command line stays cheap.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ..backends.factory import BackendSpec
    from ..templates import ChatTemplate

__all__ = [
    "MODEL_HELP",
    "OLLAMA_HELP",
    "TEMPLATE_HELP",
    "backend_spec",
    "local_model",
    "print_json",
    "read_json",
    "read_messages",
    "read_tools",
    "template_of",
    "warn",
]

MODEL_HELP = "a GGUF file or a known model's name (default: the default local model)"
TEMPLATE_HELP = ".jinja or .gguf file, or a known model's name (default: the default model)"
OLLAMA_HELP = "Ollama's native API (default URL http://127.0.0.1:11434)"
#: Where ``--ollama`` given without a URL goes (the factory's default, said here so that
#: building the command line does not import the backends).
OLLAMA_URL = "http://127.0.0.1:11434"


def format_name(*extra: str) -> Callable[[str], str]:
    """An argparse ``type`` for a flag that takes a tool format: a family's name, or one of
    ``extra`` (``auto``, ``none``, ``words``). The families load when a value is checked,
    never for ``--help`` (argparse reads a flag's ``choices`` to print any help)."""

    def check(value: str) -> str:
        if value in extra:
            return value
        from ..formats.registry import family_names

        names = family_names()
        if value not in names:
            known = ", ".join([*extra, *names])
            raise argparse.ArgumentTypeError(f"unknown tool format {value!r}; known: {known}")
        return value

    return check


#: Where ``FORMAT`` is explained in a flag's help.
FORMAT_HELP = "a family's name (`toolwire families` lists them)"


def read_json(path: str, what: str) -> Any:
    """The JSON in file ``path`` (``-``: stdin); a :class:`UsageError` naming ``what``."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} file {path} is not JSON: {exc}") from None


def read_messages(path: str) -> list[dict[str, Any]]:
    """A messages file: a list of message objects, or an object holding one."""
    data = read_json(path, "messages")
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise UsageError(f"messages file {path} must hold a list of message objects")
    return data


def read_tools(path: str | None) -> list[dict[str, Any]] | None:
    """A tools file (None when not given): a list of tool objects, or an object holding one."""
    if path is None:
        return None
    data = read_json(path, "tools")
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise UsageError(f"tools file {path} must hold a list of tool objects")
    return data


def print_json(data: Any) -> None:
    """JSON on stdout; text the terminal cannot encode (a lone surrogate a model sent as an
    escape) is written as JSON escapes instead of failing."""
    text = json.dumps(data, ensure_ascii=False, indent=2)
    try:
        print(text)
    except UnicodeEncodeError:
        print(json.dumps(data, ensure_ascii=True, indent=2))


def warn(line: str) -> None:
    """One line on stderr, as every command says what it did not do."""
    print(f"toolwire: {line}", file=sys.stderr, flush=True)


def local_model(name_or_path: str | None) -> Path:
    """The GGUF file a local-model argument names: a known model, a path, or the default."""
    from ..models import local_model as find

    return find(name_or_path)


def template_of(path: str | None) -> tuple[ChatTemplate, str]:
    """The template an argument names (a file, or a known model's, or the default model's),
    and where it came from."""
    from ..models import known_model
    from ..templates import load_template

    if path is None or known_model(path) or not Path(path).is_file():
        model = local_model(path)  # a name, or the error that names the known models
        return load_template(model), str(model)
    return load_template(path), path


def backend_spec(
    *,
    local: str | None = None,
    base_url: str | None = None,
    ollama: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    words: bool = False,
    ctx: int | None = None,
    tool_format: str | None = None,
    url_flag: str = "--base-url",
    model_flag: str = "--model",
    any_model: bool = False,
) -> BackendSpec:
    """The backend a command's flags name, read the same way by ``chat``, ``serve`` and
    ``bench``: ``--ollama [URL]`` with the model's name there, or an OpenAI-compatible
    server (``url_flag``) with the model's name there (its key: the one given, or
    ``$OPENAI_API_KEY``), or else a local model (``local``: a file or a known name).
    ``any_model``: a server may be given without a model's name (the gateway then asks it
    for the model each client names)."""
    from ..backends.factory import BackendSpec

    if ollama is not None and base_url:
        raise UsageError(f"give --ollama or {url_flag}, not both")
    if ollama is not None or base_url:
        flag = "--ollama" if ollama is not None else url_flag
        if not model and not any_model:
            raise UsageError(f"{flag} needs {model_flag} NAME")
        if ollama is not None:
            return BackendSpec(
                "ollama",
                model=model,
                base_url=ollama,
                words=words,
                tool_format=tool_format or "auto",
            )
        return BackendSpec(
            "openai",
            model=model,
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY"),
            words=words,
            tool_format=tool_format or "auto",
        )
    if words:
        raise UsageError(f"--words needs {url_flag} (or --ollama) and {model_flag}")
    return BackendSpec("local", model=local, ctx=ctx, tool_format=tool_format or "auto")
