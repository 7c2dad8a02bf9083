"""A model's chat template, rendered with tools in the sandbox.

A local model only calls tools reliably when its prompt is built exactly as in training, so
toolwire renders the model's own template (from its GGUF file or its Hugging Face repository)
rather than a generic one. Rendering passes the variables transformers passes, so published
templates see what their authors tested with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.exceptions import SecurityError, TemplateSyntaxError
from jinja2.runtime import Context

from toolwire.errors import (
    TemplateError,
    TemplateLimitError,
    TemplateSecurityError,
    ToolwireError,
)
from toolwire.templates.budget import BUDGET_KEY, TemplateBudget
from toolwire.templates.sandbox import (
    MAX_OUTPUT_CHARS,
    MAX_TEMPLATE_BYTES,
    TEMPLATE_FILENAME,
    TemplateRaised,
    add_guards,
    environment,
)
from toolwire.templates.shaping import CallIds, normalize_tools, shape_messages

__all__ = ["CONVENTIONAL_VARIABLES", "ChatTemplate"]


def _functions(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools, indent=2, ensure_ascii=False) if tools else ""


def _datetime(tools: list[dict[str, Any]]) -> str:
    del tools
    return datetime.now(timezone.utc).strftime("%b %d %Y %H:%M:%S GMT")


#: Variables some published templates read besides the ones transformers passes, each made
#: from the request's tools the way llama.cpp makes it (Firefunction v2 reads its tools as
#: the indented JSON text ``functions`` and the date as ``datetime``). Given only to a
#: template that reads the variable without setting it; ``variables`` or a render keyword
#: of the same name wins.
CONVENTIONAL_VARIABLES: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "functions": _functions,
    "datetime": _datetime,
}


#: The probe tool's name: no real tool is called so.
_PROBE_TOOL = "toolwire_probe_tool_9f3"


def _tools_on_system(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``messages`` with ``tools`` as JSON text on the system message (one made, empty, when
    there is none): the function objects, as Phi-4-mini's model card writes them."""
    text = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["tools"] = text
    else:
        out.insert(0, {"role": "system", "content": "", "tools": text})
    return out


class ChatTemplate:
    """One chat template with the special tokens it renders with.

    ``tool_source`` is a second template used when tools are given: GGUF files (and some
    Hugging Face repositories, e.g. Hermes 3) ship a named ``tool_use`` variant beside the
    default one. ``end_tokens`` are extra end-of-turn tokens (eot, eom) a generator must stop
    on besides ``eos_token``.

    Construction only checks the size; the template compiles on first render, once.
    """

    def __init__(
        self,
        source: str,
        *,
        bos_token: str = "",
        eos_token: str = "",
        end_tokens: Sequence[str] = (),
        tool_source: str | None = None,
        name: str = "",
        variables: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        #: Template variables given to every render (a render keyword of the same name wins).
        self.variables: dict[str, Any] = dict(variables or {})
        label = name or "chat template"
        for kind, text in (("template", source), ("tool_use template", tool_source)):
            if text is None:
                continue
            if not isinstance(text, str):
                raise TemplateError(f"{label}: {kind} source is {type(text).__name__}, not str")
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_TEMPLATE_BYTES:
                raise TemplateError(
                    f"{label}: {kind} source is {size:,} bytes (limit {MAX_TEMPLATE_BYTES:,})"
                )
        self.source = source
        self.tool_source = tool_source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.end_tokens: tuple[str, ...] = tuple(
            dict.fromkeys(t for t in (eos_token, *end_tokens) if t)
        )
        self._compiled: dict[bool, jinja2.Template] = {}
        self._reads: dict[bool, frozenset[str]] = {}
        #: Per source: does the template take its tools on the system message?
        self._on_system: dict[bool, bool] = {}
        self._lock = threading.Lock()

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the source; for a plain template it equals the file's checksum.

        With a ``tool_source`` the hash covers both, separated by a NUL byte (which a
        template cannot contain), so two pairs never collide by moving text across.
        """
        digest = hashlib.sha256(self.source.encode("utf-8", "surrogatepass"))
        if self.tool_source is not None:
            digest.update(b"\0" + self.tool_source.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def __repr__(self) -> str:
        tool = ", tool_use" if self.tool_source is not None else ""
        return f"ChatTemplate(name={self.name!r}, sha256={self.sha256[:12]}…{tool})"

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        enable_thinking: bool | None = None,
        call_ids: CallIds = "keep",
        keep_call_none: bool = False,
        one_call_per_message: bool = False,
        budget: TemplateBudget | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> str:
        """Render ``messages`` (OpenAI-style dicts) and ``tools`` into a prompt.

        Messages pass through :func:`shape_messages` and tools through
        :func:`normalize_tools` first (:class:`~toolwire.errors.UsageError`, a ``ValueError``,
        for a malformed one). ``tools`` reaches the template as ``None`` when there are none,
        because templates test both ``tools is not none`` and plain ``tools``.
        ``enable_thinking`` is passed only when set, since templates test ``enable_thinking is
        defined``. ``keep_call_none`` passes on a ``None`` content beside tool calls (see
        :func:`shape_messages`), and so does ``one_call_per_message``. ``extra`` keywords
        become template variables (``bos_token=""`` overrides the default, for instance); so
        do ``variables`` and, for a template that reads them, :data:`CONVENTIONAL_VARIABLES`.
        ``template_kwargs`` are a client's (Chat Completions' ``chat_template_kwargs``, as
        llama-server and vLLM take them): variables too, over every other but the messages,
        the tools and ``add_generation_prompt``; a name that is not a plain identifier, or
        that starts with ``_``, is left out (the sandbox's own live there).

        ``budget`` is the time, loop steps and memory the render may spend
        (:class:`~toolwire.templates.budget.TemplateBudget`); pass one budget to every render of
        one operation so that they share it. Without one, the render gets a fresh budget of its
        own, its time scaled to the conversation (:meth:`TemplateBudget.for_input`).

        Raises :class:`TemplateError` (the template failed or raised its own error),
        :class:`TemplateSecurityError` (it tried something the sandbox forbids; nothing ran),
        or :class:`TemplateLimitError` (it went past a limit or its budget; also a
        :class:`~toolwire.errors.LimitError`). A refused render keeps nothing alive: what the
        template built is freed before the error reaches the caller.
        """
        shaped = shape_messages(
            messages,
            call_ids=call_ids,
            keep_call_none=keep_call_none,
            one_call_per_message=one_call_per_message,
        )
        tool_list = normalize_tools(tools) if tools else []
        use_tool_source = bool(tool_list) and self.tool_source is not None
        template = self._template(use_tool_source)
        if tool_list and self._tools_on_system(use_tool_source):
            shaped = _tools_on_system(shaped, tool_list)
        conventional = {
            key: make(tool_list)
            for key, make in CONVENTIONAL_VARIABLES.items()
            if key in self._reads.get(use_tool_source, ()) and key not in extra
        }
        context: dict[str, Any] = {
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **conventional,
            **self.variables,
            **extra,
            "messages": shaped,
            "tools": tool_list or None,
            "add_generation_prompt": add_generation_prompt,
        }
        if enable_thinking is not None:
            context["enable_thinking"] = enable_thinking
        reserved = ("messages", "tools", "add_generation_prompt")
        for key, value in (template_kwargs or {}).items():
            if key.isidentifier() and not key.startswith("_") and key not in reserved:
                context[key] = value
        spend = budget if budget is not None else TemplateBudget.for_input(shaped)
        context[BUDGET_KEY] = spend
        chunks: list[str] = []
        size = 0
        error: ToolwireError | None = None
        try:
            with spend.running(), _own_context(template, context) as ctx:
                spend.check_time()
                for chunk in template.root_render_func(ctx):
                    size += len(chunk)
                    if size > MAX_OUTPUT_CHARS:
                        raise TemplateLimitError(
                            f"rendered prompt passed {MAX_OUTPUT_CHARS:,} characters"
                        )
                    chunks.append(chunk)
        except Exception as exc:  # untrusted code: every failure is converted
            error = self._convert(exc, use_tool_source)
            _release(exc)
        if error is not None:
            # raised outside the handler, so that the error holds no reference to the one it
            # replaces (whose frames held what the template built)
            del chunks, context
            raise error
        return "".join(chunks)

    def _tools_on_system(self, tool_use: bool) -> bool:
        """Whether the template takes its tools as a text on the system message (its
        ``tools`` field, as Phi-4-mini's does) instead of the ``tools`` variable: it reads no
        ``tools`` variable, and a system message holding them renders them. Learned once a
        template, by rendering, never guessed from the source."""
        known = self._on_system.get(tool_use)
        if known is not None:
            return known
        found = False
        if "tools" not in self._reads.get(tool_use, frozenset({"tools"})):
            probe = [{"type": "function", "function": {"name": _PROBE_TOOL, "parameters": {}}}]
            messages = _tools_on_system([{"role": "user", "content": "?"}], probe)
            try:
                text = self._render_plain(messages, tool_use)
            except ToolwireError:
                text = ""
            found = _PROBE_TOOL in text
        self._on_system[tool_use] = found
        return found

    def _render_plain(self, messages: list[dict[str, Any]], tool_use: bool) -> str:
        """A small render for a probe, in a budget of its own."""
        template = self._template(tool_use)
        spend = TemplateBudget.for_input(messages)
        context: dict[str, Any] = {
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            **self.variables,
            "messages": messages,
            "tools": None,
            "add_generation_prompt": True,
            BUDGET_KEY: spend,
        }
        try:
            with spend.running(), _own_context(template, context) as ctx:
                out = "".join(template.root_render_func(ctx))
        except Exception as exc:  # untrusted code: every failure is converted
            error = self._convert(exc, tool_use)
            _release(exc)
            raise error from None
        return out[:MAX_OUTPUT_CHARS]

    def _label(self, tool_use: bool) -> str:
        label = self.name or "chat template"
        return f"{label} (tool_use)" if tool_use else label

    def _template(self, tool_use: bool) -> jinja2.Template:
        """Compile the default or the tool_use source, once per instance."""
        compiled = self._compiled.get(tool_use)
        if compiled is not None:
            return compiled
        with self._lock:
            compiled = self._compiled.get(tool_use)
            if compiled is None:
                compiled = self._compile(self.tool_source if tool_use else self.source, tool_use)
                self._compiled[tool_use] = compiled
        return compiled

    def _compile(self, source: str | None, tool_use: bool) -> jinja2.Template:
        label = self._label(tool_use)
        text = source or ""
        try:
            compiled, reads = (
                _compiled(text) if len(text) <= _CACHED_SOURCE_CHARS else _compile(text)
            )
        except TemplateSyntaxError as exc:
            raise TemplateError(
                f"{label}: syntax error on line {exc.lineno}: {exc.message}"
            ) from None
        except Exception as exc:  # the parser runs on untrusted text
            error = self._convert(exc, tool_use)
            _release(exc)
            raise error from None
        self._reads[tool_use] = reads
        return compiled

    def _convert(self, exc: Exception, tool_use: bool) -> ToolwireError:
        """Turn whatever a template raised into one of toolwire's errors."""
        label = self._label(tool_use)
        line = _template_line(exc.__traceback__, self._compiled.get(tool_use))
        where = f" (line {line})" if line else ""
        if isinstance(exc, ToolwireError):  # a limit, raised by the sandbox's guards
            return type(exc)(f"{label}{where}: {exc}")
        if isinstance(exc, TemplateRaised):
            return TemplateError(f"{label} raised{where}: {exc.message}")
        if isinstance(exc, SecurityError):
            return TemplateSecurityError(f"{label}: sandbox violation{where}: {exc}")
        if isinstance(exc, RecursionError):
            return TemplateLimitError(f"{label}: recursion too deep{where}")
        if isinstance(exc, MemoryError):
            return TemplateLimitError(f"{label}: out of memory while rendering{where}")
        if isinstance(exc, jinja2.TemplateError):
            return TemplateError(f"{label}{where}: {exc.message or type(exc).__name__}")
        return TemplateError(f"{label}{where}: {type(exc).__name__}: {exc}")


@contextmanager
def _own_context(template: jinja2.Template, variables: dict[str, Any]) -> Iterator[Context]:
    """The render's Jinja context, emptied when the render ends. A macro the template
    defines lives in the context and refers back to it: a cycle that only the garbage
    collector would break, holding every value the template built. (Rendering through
    ``root_render_func`` rather than ``generate`` also keeps Jinja from rewriting a failure's
    traceback with fake frames that hold the template's variables.)"""
    ctx = template.new_context(variables)
    try:
        yield ctx
    finally:
        ctx.vars.clear()
        ctx.parent.clear()
        ctx.exported_vars.clear()


#: Sources up to this size share one compiled template (published ones are under 32 KiB);
#: detection renders copies of a template with other special tokens, which compile alike.
_CACHED_SOURCE_CHARS = 64 * 1024


def _compile(source: str) -> tuple[jinja2.Template, frozenset[str]]:
    """Compile ``source`` in the sandbox with its guards, and the variables it reads without
    setting them. Compiling runs none of the template's code."""
    env = environment()
    tree = env.parse(source)
    reads = frozenset(meta.find_undeclared_variables(tree))
    code = env.compile(add_guards(tree), filename=TEMPLATE_FILENAME)
    return env.template_class.from_code(env, code, env.make_globals(None), None), reads


#: The same, remembered: a compiled template keeps no state between renders (each render's
#: budget and variables travel in its own context), so one compilation serves every copy.
_compiled = functools.lru_cache(maxsize=32)(_compile)


def _release(exc: BaseException) -> None:
    """Drop what a failed render's exception keeps alive: the frames of its traceback (and
    of the exceptions chained to it) hold the template's values as locals, and a frame that
    refers back to the exception forms a cycle only the garbage collector would break, so a
    refused 500 MB value would outlive the refusal."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        todo += [current.__cause__, current.__context__]
        current.__traceback__ = None
        current.__cause__ = current.__context__ = None


def _template_line(tb: TracebackType | None, template: jinja2.Template | None) -> int | None:
    """The template line of the innermost template frame, mapped from the compiled code's
    line (the render keeps Jinja from rewriting tracebacks: see :func:`_own_context`)."""
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == TEMPLATE_FILENAME:
            line = template.get_corresponding_lineno(lineno) if template is not None else None
    return line
