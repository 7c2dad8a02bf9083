"""Sampling under a grammar in llama-cpp-python, at the speed of free sampling.

The mask engine is llguidance: it reads the GBNF toolwire builds and answers, for one
grammar state, which tokens of the vocabulary may come next. It walks a trie of the
vocabulary's bytes instead of checking each token alone, so a whole-vocabulary mask costs
tens of microseconds where llama.cpp's own grammar sampler spent milliseconds (it matched
every one of 150,000 tokens against the grammar's stacks). Most tokens a model picks are
allowed anyway, so the token is first chosen from the raw logits and checked alone; only
when the grammar refuses it is the mask computed and the choice made again.

llguidance is part of the ``local`` extra, with llama-cpp-python: every install that can
run a model in-process has it, so llama.cpp's grammar sampler is not kept as a second
engine. A model without llguidance (a hand-made install) generates free: see
:func:`mask_engine_available`.

The engine needs the model's vocabulary as bytes (:class:`Vocabulary`): reading 150,000
token pieces takes about a second, so the backend that loaded the model builds it once, on
the first constrained call, and hands it to every :class:`GrammarSampler` after.

llama-cpp-python's ``Llama.generate`` takes only an eager grammar (its lazy, trigger-pattern
grammar is in a private module, and its triggers are matched by regular expressions over the
whole reply at every token), so the trigger is found here in Python, by
:class:`~toolwire.formats.gbnf.Constraint`, and the grammar starts there: the tokens written
since the call began are fed to it, and generation goes on under it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import threading
import time
from typing import Any

import numpy as np

from ..pipeline.sampling import Sampling

__all__ = ["GrammarSampler", "Vocabulary", "last_logits", "mask_engine_available"]

#: The bytes llguidance reads as "a special token": a token whose text starts with it is
#: never matched by the grammar's text, only allowed where the grammar may end.
_SPECIAL = b"\xff"


def mask_engine_available() -> bool:
    """Whether llguidance, the mask engine, is installed (it is, with the ``local`` extra)."""
    return importlib.util.find_spec("llguidance") is not None


class Vocabulary:
    """One loaded model's vocabulary as the mask engine reads it, built on first use.

    Every token is its text (special tokens' text included, as the model's own decoding
    writes them, so a call marker that is one token is matched by the grammar's literal of
    it), except the tokens that end the turn: those are special, allowed only where the
    grammar may end. Thread-safe: the first caller builds it, the others wait for it.
    """

    def __init__(self, llama: Any) -> None:
        self._llama = llama
        self.n_vocab = int(llama.n_vocab())
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        #: Seconds the build took (0 until built).
        self.build_seconds = 0.0

    @property
    def tokenizer(self) -> Any:
        """The ``llguidance.LLTokenizer`` of this vocabulary."""
        with self._lock:
            if self._tokenizer is None:
                started = time.perf_counter()
                self._tokenizer = _build_tokenizer(self._llama, self.n_vocab)
                self.build_seconds = time.perf_counter() - started
            return self._tokenizer


def _build_tokenizer(llama: Any, n_vocab: int) -> Any:
    import llama_cpp
    from llguidance import LLTokenizer

    vocab = llama._model.vocab
    count = int(llama_cpp.llama_vocab_n_tokens(vocab))
    size = 1024
    buffer = ctypes.create_string_buffer(size)
    pieces: list[bytes] = []
    ends: list[int] = []
    for token in range(count):
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, size, 0, True)
        if n < 0:  # a piece longer than the buffer: read again with room for it
            bigger = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(vocab, token, bigger, -n, 0, True)
            piece = bigger.raw[:n]
        else:
            piece = buffer.raw[:n]
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            ends.append(token)
            piece = _SPECIAL + piece
        pieces.append(piece)
    pieces.extend(b"" for _ in range(n_vocab - count))  # padding some models' logits have
    eos = int(llama_cpp.llama_vocab_eos(vocab))
    if eos >= 0 and eos not in ends:
        ends.append(eos)
    tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    return LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]
        tokens=pieces, vocab_ptr=vocab, tokenize_fptr=tokenize, eos_token=ends or None
    )


class GrammarSampler:
    """One grammar over one model's vocabulary. Not thread-safe; one per generation.

    A grammar the engine cannot take is a ValueError when the sampler is made. ``masks`` and
    ``mask_seconds`` count the whole-vocabulary masks computed and the time they took.
    """

    def __init__(self, vocabulary: Vocabulary, grammar: str, *, seed: int = 0) -> None:
        import llguidance

        try:
            compiled = llguidance.grammar_from("gbnf", grammar)
        except Exception as exc:  # the converter raises plain Exceptions on bad GBNF
            raise ValueError(f"the engine refused the grammar: {exc}") from None
        self._matcher = llguidance.LLMatcher(vocabulary.tokenizer, compiled, log_level=0)
        if self._matcher.is_error():
            raise ValueError(f"the engine refused the grammar: {self._matcher.get_error()}")
        self._n_vocab = vocabulary.n_vocab
        self._rng = np.random.default_rng(seed)
        words = (vocabulary.tokenizer.vocab_size + 31) // 32
        self._bits = np.zeros(words, dtype=np.int32)
        self.masks = 0
        self.mask_seconds = 0.0

    def close(self) -> None:
        """Nothing to free (the matcher is freed with the object); kept for ``with``."""

    def __enter__(self) -> GrammarSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def allows(self, token: int) -> bool:
        """Does the grammar, where it stands, allow ``token`` next?"""
        return bool(self._matcher.validate_tokens([token]) == 1)

    def accept(self, token: int) -> None:
        """The grammar moves past ``token`` (one it allows); a token it refuses is a
        ValueError."""
        if not self._matcher.consume_token(token):
            raise ValueError(f"the grammar refused token {token}: {self._matcher.get_error()}")

    def allowed(self) -> np.ndarray:
        """Which tokens the grammar allows next, one bool per token of the logits."""
        started = time.perf_counter()
        self._matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        self.mask_seconds += time.perf_counter() - started
        self.masks += 1
        bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little").astype(bool)
        if len(bits) < self._n_vocab:
            bits = np.concatenate([bits, np.zeros(self._n_vocab - len(bits), dtype=bool)])
        return bits[: self._n_vocab]

    def allowed_logits(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` with every token the grammar refuses set to minus infinity."""
        return np.where(self.allowed()[: len(logits)], logits, -np.inf).astype(logits.dtype)

    def choose(
        self,
        logits: np.ndarray,
        temperature: float,
        end: int | None = None,
        sampling: Sampling | None = None,
    ) -> int:
        """The next token: chosen freely, kept when the grammar allows it, else chosen again
        among the tokens it allows. None allowed (the grammar cannot go on) is a ValueError.

        ``end``: the model's end-of-turn token. When the free choice is refused where the
        grammar may end, the turn ends: the model wanted to write something that is not a
        call, and another call is not forced out of it.
        """
        token = _pick(logits, temperature, self._rng, sampling)
        if self.allows(token):
            return token
        if end is not None and self._matcher.is_accepting():
            return end
        masked = self.allowed_logits(logits)
        if not np.isfinite(masked).any():
            raise ValueError("the grammar allows no token here")
        return _pick(masked, temperature, self._rng, sampling)


def _pick(
    logits: np.ndarray,
    temperature: float,
    rng: np.random.Generator,
    sampling: Sampling | None = None,
) -> int:
    """A token drawn as llama.cpp's sampler chain draws it: the most likely at temperature
    0; else ``top_k``, then ``top_p``, then ``min_p`` cut the candidates by their
    probabilities before temperature (llama.cpp's defaults 40, 0.95 and 0.05 where the
    request gives none), and the token is drawn from those left at ``temperature``. The
    candidates are cut to ``top_k`` first, in linear time, so the rest works on a few dozen
    tokens, not the vocabulary. No candidate at all is a ValueError."""
    if temperature <= 0:
        return int(np.argmax(logits))
    s = sampling or Sampling()
    top_k = 40 if s.top_k is None else s.top_k
    top_p = 0.95 if s.top_p is None else s.top_p
    min_p = 0.05 if s.min_p is None else s.min_p
    candidates = np.flatnonzero(logits > -np.inf)
    if not len(candidates):
        raise ValueError("no token may come next")
    forced = candidates[np.isposinf(logits[candidates])]
    if len(forced):
        return int(forced[0])
    if 0 < top_k < len(candidates):
        candidates = candidates[np.argpartition(logits[candidates], -top_k)[-top_k:]]
    base = logits[candidates].astype(np.float64)
    base -= base.max()
    probs = np.exp(base)
    probs /= probs.sum()
    kept = np.ones(len(candidates), dtype=bool)
    if top_p < 1:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        kept[order[np.searchsorted(cumulative, top_p) + 1 :]] = False
    if min_p > 0:
        kept &= probs >= min_p * probs.max()
    weights = np.where(kept, np.exp(base / temperature), 0.0)
    weights /= weights.sum()
    return int(candidates[rng.choice(len(candidates), p=weights)])


def last_logits(llama: Any) -> np.ndarray:
    """The logits after the last evaluated token (a copy)."""
    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1)
    logits: np.ndarray = np.ctypeslib.as_array(pointer, shape=(int(llama.n_vocab()),)).copy()
    return logits
