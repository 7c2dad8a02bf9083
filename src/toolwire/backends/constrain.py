"""Sampling under a grammar in llama-cpp-python, at the speed of free sampling.

llama.cpp's grammar sampler checks every token of the vocabulary against the grammar; for a
150,000-token vocabulary that doubles the time per token of a 0.5B model. Most tokens a model
picks are allowed anyway, so — as llama.cpp's own sampler does — the token is first chosen
from the raw logits and checked alone; only when the grammar refuses it is the whole
vocabulary filtered and the choice made again.

llama-cpp-python's ``Llama.generate`` takes only an eager grammar (its lazy, trigger-pattern
grammar is in a private module, and its triggers are matched by regular expressions over the
whole reply at every token), so the trigger is found here in Python, by
:class:`~toolwire.formats.gbnf.Constraint`, and the grammar starts there: the tokens written
since the call began are fed to it, and generation goes on under it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["GrammarSampler", "last_logits"]


class GrammarSampler:
    """One grammar over one model's vocabulary. Not thread-safe; one per generation."""

    def __init__(self, llama: Any, grammar: str, *, seed: int = 0) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llama = llama
        vocab = llama._model.vocab
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar.encode("utf-8"), b"root"
        )
        if not self._sampler:
            raise ValueError("the engine refused the grammar")
        self._n_vocab = int(llama.n_vocab())
        self._rng = np.random.default_rng(seed)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = np.zeros(
            self._n_vocab,
            dtype=np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]),
        )
        self._all["id"] = np.arange(self._n_vocab, dtype=np.int32)

    def close(self) -> None:
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None

    def __enter__(self) -> GrammarSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def allows(self, token: int) -> bool:
        """Does the grammar, where it stands, allow ``token`` next?"""
        self._one[0].id = token  # type: ignore[assignment]
        self._one[0].logit = 0.0
        self._one[0].p = 0.0
        array = self._lib.llama_token_data_array(
            data=ctypes.cast(self._one, self._lib.llama_token_data_p),
            size=1,
            selected=-1,
            sorted=False,
        )
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return bool(np.isfinite(self._one[0].logit))

    def accept(self, token: int) -> None:
        """The grammar moves past ``token`` (one it allows)."""
        self._lib.llama_sampler_accept(self._sampler, token)

    def allowed_logits(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` with every token the grammar refuses set to minus infinity."""
        self._all["logit"] = logits
        array = self._lib.llama_token_data_array(
            data=self._all.ctypes.data_as(self._lib.llama_token_data_p),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )
        self._lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return np.array(self._all["logit"])

    def choose(self, logits: np.ndarray, temperature: float, end: int | None = None) -> int:
        """The next token: chosen freely, kept when the grammar allows it, else chosen again
        among the tokens it allows. None allowed (the grammar cannot go on) is a ValueError.

        ``end``: the model's end-of-turn token. When the free choice is refused where the
        grammar may end, the turn ends: the model wanted to write something that is not a
        call, and another call is not forced out of it.
        """
        token = _pick(logits, temperature, self._rng)
        if self.allows(token):
            return token
        if end is not None and self.allows(end):
            return end
        masked = self.allowed_logits(logits)
        if not np.isfinite(masked).any():
            raise ValueError("the grammar allows no token here")
        return _pick(masked, temperature, self._rng)


def _pick(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    if temperature <= 0:
        return int(np.argmax(logits))
    finite = np.isfinite(logits)
    scaled = np.where(finite, logits / temperature, -np.inf)
    top = np.max(scaled)
    weights = np.exp(scaled - top)
    weights /= weights.sum()
    return int(rng.choice(len(weights), p=weights))


def last_logits(llama: Any) -> np.ndarray:
    """The logits after the last evaluated token (a copy)."""
    import llama_cpp

    pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1)
    logits: np.ndarray = np.ctypeslib.as_array(pointer, shape=(int(llama.n_vocab()),)).copy()
    return logits
