"""Load a chat template from a file, whichever kind of file holds it."""

from __future__ import annotations

import os
from pathlib import Path

from toolwire.errors import TemplateError
from toolwire.templates.chat import ChatTemplate
from toolwire.templates.gguf import GGUF_MAGIC, read_gguf
from toolwire.templates.sandbox import MAX_TEMPLATE_BYTES

__all__ = ["load_template"]


def load_template(path: str | os.PathLike[str]) -> ChatTemplate:
    """A :class:`ChatTemplate` from a GGUF model or a template text file.

    A ``.gguf`` file, or any file starting with the GGUF magic, yields its embedded template
    (:func:`read_gguf`; failures raise :class:`~toolwire.errors.GGUFError`). Any other file
    is read as UTF-8 template source, named after the file's stem; a file that cannot be read,
    is not UTF-8 or is over :data:`~toolwire.templates.sandbox.MAX_TEMPLATE_BYTES` raises
    :class:`~toolwire.errors.TemplateError`.
    """
    file = Path(path)
    if file.suffix.lower() == ".gguf":
        return read_gguf(file).template()
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_TEMPLATE_BYTES + 1)
    except OSError as exc:
        raise TemplateError(f"{file}: cannot read template: {exc.strerror or exc}") from exc
    if data.startswith(GGUF_MAGIC):
        return read_gguf(file).template()
    if len(data) > MAX_TEMPLATE_BYTES:
        raise TemplateError(f"{file}: template is over {MAX_TEMPLATE_BYTES:,} bytes")
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(
            f"{file}: template is not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc
    return ChatTemplate(source, name=file.stem)
