"""Prompt prefixes kept between turns on a local model, and across conversations that take
turns on it.

``Llama.generate`` keeps its context between calls and evaluates only what follows the
longest prefix a new prompt shares with it, so turn 2 of a conversation evaluates only the
turn's new tokens: the past turns as the template renders them again, and the tool's result.
Two conversations that alternate on one model share little (their system prompts and tools
differ, or only the first lines match), so each would evaluate its whole prompt again at
every turn: a coding agent's 20,000 tokens, minutes at this machine's speed.

:class:`SavedPrefixes` keeps the context's key/value cells (``llama_state_seq_get_data``:
the cells of sequence 0 alone, not the logits nor the output buffer that
``Llama.save_state`` copies too) when a prompt is about to overwrite more of it than it
keeps, and brings back the saved context that shares the longest prefix with a prompt when
that is longer than what the live context shares. Saving costs a copy of the cells (13 KB a
token on the default model; measured at 3,000 tokens: 39 MiB, saved in 45 ms and loaded in
78 ms, where evaluating them again takes about a minute on this machine's two cores), paid
only when conversations switch; the states kept are bounded in bytes (:data:`KEPT_BYTES`),
the least recently used dropped first. A turn on one conversation alone never saves or
loads anything.

:meth:`SavedPrefixes.take` also says how many of the prompt's tokens are not evaluated again
(``cached_tokens`` of the usage): the longest prefix, less the last token, which
``generate`` evaluates again to have its logits.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KEPT_BYTES", "SWITCH_TOKENS", "SavedPrefixes", "common_prefix"]

#: The bytes of saved contexts kept for one model, by default.
KEPT_BYTES = 1 << 30
#: A context is saved, or a saved one brought back, only for at least this many tokens: a
#: shorter prefix is evaluated again sooner than copied.
SWITCH_TOKENS = 256


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from the start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class _State:
    key: int
    tokens: list[int]
    cells: Any  # a ctypes array of the sequence's cells
    size: int


class SavedPrefixes:
    """Saved contexts of one model (see the module); use it while holding the model."""

    def __init__(self, max_bytes: int = KEPT_BYTES, *, switch_tokens: int = SWITCH_TOKENS) -> None:
        self.max_bytes = max_bytes
        self.switch_tokens = switch_tokens
        self._states: OrderedDict[int, _State] = OrderedDict()
        self._next = 0
        #: what was done, for the curious and the tests: contexts saved and brought back
        self.saved = 0
        self.loaded = 0

    def kept_bytes(self) -> int:
        return sum(s.size for s in self._states.values())

    def take(self, llama: Any, prompt: Sequence[int]) -> int:
        """Make ``llama``'s context the one that shares the longest prefix with ``prompt``
        (saving the live one first if ``prompt`` would overwrite more of it than it keeps);
        the tokens of ``prompt`` that will not be evaluated."""
        if not _stateful(llama):
            return 0
        n = int(llama.n_tokens)
        live = list(llama.input_ids[:n])
        here = common_prefix(live, prompt)
        best_key, best = None, here
        for key, state in self._states.items():
            shared = common_prefix(state.tokens, prompt)
            if shared > best:
                best_key, best = key, shared
        lost = n - here
        if self.max_bytes > 0 and lost >= self.switch_tokens and lost > here:
            self._save(llama, live)
        # (saving may have dropped it, the least recently used)
        chosen = self._states.get(best_key) if best_key is not None else None
        if chosen is not None and best - here >= self.switch_tokens and self._load(llama, chosen):
            self._states.move_to_end(chosen.key)
            here = best
        return max(0, min(here, len(prompt) - 1))

    def _save(self, llama: Any, tokens: list[int]) -> None:
        import llama_cpp

        for key, state in list(self._states.items()):
            if common_prefix(state.tokens, tokens) == len(state.tokens):
                del self._states[key]  # the live context holds it all, and more
        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        if size <= 0 or size > self.max_bytes:
            return
        cells = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, cells, size, 0))
        if written <= 0:
            return
        self._states[self._next] = _State(self._next, tokens, cells, written)
        self._next += 1
        self.saved += 1
        while self.kept_bytes() > self.max_bytes:
            self._states.popitem(last=False)

    def _load(self, llama: Any, state: _State) -> bool:
        import llama_cpp

        llama._ctx.kv_cache_clear()
        if int(llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, state.cells, state.size, 0)) == 0:
            llama._ctx.kv_cache_clear()
            llama.n_tokens = 0
            return False
        count = len(state.tokens)
        llama.input_ids[:count] = state.tokens
        llama.n_tokens = count
        # the logits are not the loaded context's: generate must evaluate one token again
        # (Llama.load_state says the same)
        llama._requires_eval = True
        self.loaded += 1
        return True


def _stateful(llama: Any) -> bool:
    """A real llama-cpp-python model (a scripted one keeps no context)."""
    return all(hasattr(llama, a) for a in ("_ctx", "input_ids", "n_tokens"))
