"""A local GGUF model in-process, through llama-cpp-python (the ``local`` extra).

The conversation is rendered through the model's own chat template with the tools; the
prompt is tokenised with special tokens parsed; each generated token is decoded with special
tokens kept as text (``<tool_call>``, ``[TOOL_CALLS]``, ``<|python_tag|>``), UTF-8 kept
intact across tokens; generation stops at an end-of-generation token or ``max_tokens`` — no
stop strings, the model ends its turn itself — and the text goes through the detected
family's stream parser — in the reply pipeline, which decides for this transport as for every
other. Thinking is off unless asked for. The context budget counts the prompt with its tool
block, in the model's own tokens.

The context is kept between turns, and saved when another conversation takes the model
(:mod:`toolwire.backends.prefix`), so a turn evaluates only what its prompt does not share
with one before it. The usage counts the whole prompt as ``prompt_tokens``, and the part
not evaluated again as ``cached_tokens``.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from ..conversation import prune
from ..errors import BackendError, ModelNotFoundError, UsageError
from ..events import Done, Event, Notice, TextDelta
from ..formats.reasoning import opens_reasoning
from ..pipeline import ModelMemory, Plan, Prepared, Request, default_memory
from ..templates import ChatTemplate
from .generate import Generation
from .prefix import KEPT_BYTES, SavedPrefixes
from .prompt import TemplateTransport

__all__ = ["LOCAL_FIELDS", "LlamaCppBackend", "engine_threads"]

#: The sampling fields the local engine honours (llama.cpp's samplers, ``logit_bias`` added
#: to the logits before them; ``stop`` is cut by the pipeline as the reply is read). Engine
#: fields but its template's are named in a ``field-not-honoured`` notice.
LOCAL_FIELDS = frozenset(
    {
        "logit_bias",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
    }
)

_END = object()


def engine_threads(
    allowed: Sequence[int] | None = None, cpus: Path = Path("/sys/devices/system/cpu")
) -> int:
    """One thread per physical core this process may run on (``allowed``: its CPUs, None:
    its affinity), as llama.cpp's server counts them by default (a core's second hardware
    thread only slows the matrix work down); every allowed CPU where ``cpus`` does not tell
    the topology."""
    if allowed is None:
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux
            return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in allowed:
        topology = cpus / f"cpu{cpu}" / "topology"
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return max(1, len(allowed))
        cores.add((package, core))
    return max(1, len(cores))


class _Worker:
    """The one thread that generates on one model, for as long as the model is loaded.

    llama.cpp computes each token on a pool of OpenMP threads that belongs to the thread
    that calls it; a thread made per reply makes a pool per reply, and two pools alive at
    once (a reply's, and one left by any other caller) outnumber the cores, so OpenMP stops
    spinning between the steps of a token: decoding was a third slower on two cores
    (``benchmarks/local_engine.py``). A daemon thread, as the one per reply was: a process
    that exits mid-reply is not held by it."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[Callable[[], None]] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._start:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="llamacpp")
                self._thread.start()
        self._jobs.put(job)

    def _run(self) -> None:
        while True:
            self._jobs.get()()  # a job reports its own failures (``_generate``)


class _Reused(int):
    """The prompt's tokens not evaluated again (the generation thread tells ``send``)."""


class LlamaCppBackend(TemplateTransport):
    """A GGUF model run in this process: its template's prompt (:class:`TemplateTransport`),
    tokenised and generated from."""

    name = "llamacpp"
    native_tools = False
    sampling_fields = LOCAL_FIELDS
    #: its template's variables and its thinking switch (see backends/prompt.py); who the
    #: client is and its cache key need nothing of it (it keeps its own prefixes)
    engine_fields = frozenset(
        {
            "chat_template_kwargs",
            "reasoning_effort",
            "user",
            "prompt_cache_key",
            "safety_identifier",
        }
    )

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        flash_attn: bool = True,
        tool_format: str = "auto",
        seed: int = 0,
        default_max_tokens: int = 512,
        llama: Any = None,
        memory: ModelMemory | None = None,
        saved_prefix_bytes: int = KEPT_BYTES,
    ) -> None:
        """``saved_prefix_bytes``: the bytes of contexts kept for conversations that take
        turns on the model (:class:`~toolwire.backends.prefix.SavedPrefixes`; 0: none).

        ``n_threads`` (None: :func:`engine_threads`) serves both the prompt and each token,
        and flash attention is on, as llama.cpp's own server has them by default:
        llama-cpp-python's defaults (half the logical CPUs for each token, attention without
        flash) made decoding half as fast on two cores and a 6,000-token prompt a third
        slower than ``llama-server`` on the same GGUF (``benchmarks/local_engine.py``)."""
        if llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ModelNotFoundError(
                    "local models need llama-cpp-python: pip install 'toolwire[local]'"
                ) from exc
            if not Path(model_path).is_file():
                raise ModelNotFoundError(f"no model file at {model_path}")
            threads = n_threads or engine_threads()
            llama = Llama(
                model_path=str(model_path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                flash_attn=flash_attn,
                seed=seed,
                verbose=False,
            )
        self.llama = llama
        self.seed = seed
        # a real llama-cpp-python model samples under a grammar (when the mask engine is
        # installed); a scripted one cannot. The vocabulary the engine reads is built once,
        # on the first grammar.
        self.can_constrain = False
        self.vocabulary: Any = None
        if hasattr(llama, "_model") and hasattr(llama, "_ctx"):
            from .constrain import Vocabulary, mask_engine_available

            self.can_constrain = mask_engine_available()
            self.vocabulary = Vocabulary(llama) if self.can_constrain else None
        self.n_ctx = int(llama.n_ctx())
        self.default_max_tokens = default_max_tokens
        super().__init__(
            self._template(Path(model_path).stem),
            tool_format=tool_format,
            context_tokens=self.n_ctx,
            memory=memory if memory is not None else default_memory(),
            model=Path(model_path).stem,
        )
        self.endpoint = "local:" + str(model_path)
        self._lock = threading.Lock()  # one generation at a time on one context
        self._worker = _Worker()
        self.prefixes = SavedPrefixes(saved_prefix_bytes)

    # ------------------------------------------------------------------ the model's own

    def _text_of(self, token: int) -> str:
        data: bytes = self.llama.detokenize([token], special=True)
        return data.decode("utf-8", "replace")

    def decode(self, tokens: Sequence[int]) -> str:
        """Tokens to text one at a time, as generation decodes them: special tokens kept
        as their text, a character split over several tokens put back together."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        out = [decoder.decode(self.llama.detokenize([t], special=True)) for t in tokens]
        return "".join(out) + decoder.decode(b"", final=True)

    def _template(self, name: str) -> ChatTemplate:
        meta: Mapping[str, str] = self.llama.metadata or {}
        source = meta.get("tokenizer.chat_template")
        if not source:
            raise BackendError(f"{name} has no chat template in its metadata")
        bos = self._text_of(self.llama.token_bos()) if self.llama.token_bos() >= 0 else ""
        eos = self._text_of(self.llama.token_eos()) if self.llama.token_eos() >= 0 else ""
        return ChatTemplate(
            source,
            bos_token=bos,
            eos_token=eos,
            tool_source=meta.get("tokenizer.chat_template.tool_use"),
            name=name,
        )

    def _is_end(self, token: int) -> bool:
        try:
            import llama_cpp

            return bool(llama_cpp.llama_vocab_is_eog(self.llama._model.vocab, token))
        except (AttributeError, ImportError):  # an older binding: eos is the end
            return bool(token == self.llama.token_eos())

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's tokenizer (special tokens parsed)."""
        return len(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _fit(self, request: Request, plan: Plan, room: int) -> tuple[Request, str, list[int]]:
        """The request, pruned by whole turns (oldest first) until its prompt — tool block
        included, in the model's own tokens — leaves ``room`` tokens for the reply. A prompt
        that cannot, pruned as far as it goes, is the client's to shorten: a
        :class:`~toolwire.errors.UsageError` (a 400 through the gateway, in each API's
        shape), never a failure of the engine."""
        add_bos = str((self.llama.metadata or {}).get("tokenizer.ggml.add_bos_token")) == "true"
        budget = self.n_ctx - room
        messages: Sequence[Mapping[str, Any]] = list(request.messages)
        while True:
            text = self.prompt(replace(request, messages=messages), plan)
            tokens = self.llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)
            if len(tokens) <= budget:
                return replace(request, messages=messages), text, tokens
            sizes = [self._message_tokens(m) for m in messages]
            fewer = prune(messages, sum(sizes) - (len(tokens) - budget), self._message_tokens)
            if len(fewer) >= len(messages):
                raise UsageError(
                    f"the prompt takes {len(tokens)} tokens with its tools, and the model's "
                    f"context is {self.n_ctx} (with room for a reply of {room}): shorten the "
                    "conversation, or serve the model with a larger context"
                )
            messages = fewer

    def _message_tokens(self, message: Mapping[str, Any]) -> int:
        text = str(message.get("content") or "") + str(message.get("tool_calls") or "")
        return self.count_tokens(text) + 4

    # ------------------------------------------------------------------ generation

    def prepare(self, request: Request, plan: Plan) -> Prepared:
        """The prompt rendered as the plan says and fitted to the window, as tokens.

        ``max_tokens`` is a ceiling, not a reservation (as llama-server takes it): the reply
        may run to the room the prompt leaves, at most ``max_tokens``. Old turns are pruned
        only for a prompt that leaves less than the smaller of ``max_tokens`` and the
        backend's default reply length (an agent asking 128,000 tokens of a 32,768-token
        model keeps its whole conversation)."""
        asked = request.max_tokens or self.default_max_tokens
        fitted, text, tokens = self._fit(request, plan, min(asked, self.default_max_tokens))
        max_tokens = max(1, min(asked, self.n_ctx - len(tokens)))
        return Prepared(
            replace(fitted, max_tokens=max_tokens),
            tokens,
            reasoning_open=opens_reasoning(text),
            constraint=plan.constraint,
        )

    async def send(self, prepared: Prepared) -> AsyncGenerator[Event, None]:
        """Generate: the model's text as it comes, special tokens kept; then Done."""
        tokens = prepared.payload
        request = prepared.request
        max_tokens = request.max_tokens or self.default_max_tokens
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        self._worker.submit(partial(self._generate, prepared, max_tokens, loop, queue, stop))
        generated = reused = 0
        finish = "stop"
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise BackendError(f"generation failed: {item}") from item
                if isinstance(item, _Reused):
                    reused = int(item)
                    continue
                if isinstance(item, tuple):  # ("length" | "stop", count)
                    finish, generated = item
                    continue
                yield item if isinstance(item, Notice) else TextDelta(item)
        finally:
            stop.set()  # closing the stream stops generation
        usage = {"prompt_tokens": len(tokens), "completion_tokens": generated}
        yield Done(finish, {**usage, "cached_tokens": reused})

    def generation(
        self,
        prepared: Prepared,
        *,
        put: Callable[[Any], None],
        stop: threading.Event,
        max_tokens: int | None = None,
    ) -> Generation:
        """One generation of ``prepared`` on this model (see :class:`Generation`); run it
        while holding the model (``send`` does)."""
        temperature = prepared.request.temperature
        return Generation(
            self.llama,
            prepared.payload,
            max_tokens=max_tokens or prepared.request.max_tokens or self.default_max_tokens,
            temperature=0.0 if temperature is None else temperature,
            constraint=prepared.constraint if self.can_constrain else None,
            is_end=self._is_end,
            put=put,
            stop=stop,
            seed=self.seed,
            thinking=prepared.reasoning_open,
            vocabulary=self.vocabulary,
            sampling=prepared.request.sampling,
        )

    def _generate(
        self,
        prepared: Prepared,
        max_tokens: int,
        loop: asyncio.AbstractEventLoop,
        queue: asyncio.Queue[Any],
        stop: threading.Event,
    ) -> None:
        def put(item: Any) -> None:
            if stop.is_set() and loop.is_closed():
                return  # the reader left and took its loop along: nobody to tell
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop closed between the check and the call
                stop.set()

        try:
            with self._lock:
                seeded = prepared.request.sampling.seed
                if seeded is None or seeded < 0:
                    put(_Reused(self.prefixes.take(self.llama, prepared.payload)))
                elif hasattr(self.llama, "reset"):
                    # a seed asks for the same reply again: the prompt is evaluated whole, as
                    # it was the first time (a kept prefix changes the logits a little, and a
                    # sampled reply with them; llama-server says the same of cache_prompt)
                    self.llama.reset()
                self.generation(prepared, put=put, stop=stop, max_tokens=max_tokens).run()
        except Exception as exc:  # reported to the consumer as a BackendError
            put(exc)
        finally:
            put(_END)
