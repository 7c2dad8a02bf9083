"""One generation on a llama-cpp-python model: free text, and calls finished under a grammar.

Generation runs free through ``Llama.generate`` (its prompt cache kept), each token's text
watched by the turn's :class:`~toolwire.formats.gbnf.Constraint`. When the text shows that a
call has begun, free generation stops; the tokens written since the call began are fed to
the call's grammar, and generation goes on under it, token by token
(:class:`~toolwire.backends.constrain.GrammarSampler`, over the model's
:class:`~toolwire.backends.constrain.Vocabulary`, which the backend builds once), until the
grammar is complete and the model ends its turn. If the grammar refuses what was already
written (the model began something the grammar does not describe), generation goes on free,
as if no trigger had fired. With ``required`` the grammar holds from the first token.

The caller gets each piece of text as it is decoded, a notice when a grammar took over, and
at the end the finish reason and the number of tokens generated.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import events as ev
from ..formats.gbnf import Constraint, Trigger
from ..formats.reasoning import OPENERS
from ..pipeline.sampling import Sampling

if TYPE_CHECKING:
    from .constrain import GrammarSampler, Vocabulary

__all__ = ["Generation"]

_BEGUN = (
    "the call the model began was finished under a grammar of the declared tools and their "
    "argument schemas"
)
_REQUIRED = (
    "a call is required: the reply was written under a grammar of the declared tools and "
    "their argument schemas"
)
#: Where thinking opens and closes: a call marker inside thinking is never constrained.
_MARKS = {**{o: True for o in OPENERS}, **{c: False for c in OPENERS.values()}}
_LONGEST = max(map(len, _MARKS))


class Generation:
    """One reply generated on ``llama`` from ``tokens``; :meth:`run` does it.

    ``put`` receives text pieces (str), notices (:class:`~toolwire.events.Notice`) and, last,
    ``(finish, count)``. ``is_end`` says whether a token ends the model's turn.
    ``vocabulary``: the model's vocabulary for the mask engine, kept by the backend so it
    is built once per loaded model (None: built here, when a grammar first needs it).
    """

    def __init__(
        self,
        llama: Any,
        tokens: Sequence[int],
        *,
        max_tokens: int,
        temperature: float,
        constraint: Constraint | None,
        is_end: Callable[[int], bool],
        put: Callable[[Any], None],
        stop: threading.Event,
        seed: int = 0,
        thinking: bool = False,
        vocabulary: Vocabulary | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self.llama = llama
        self.vocabulary = vocabulary
        self.prompt = list(tokens)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.constraint = constraint
        self.is_end = is_end
        self.put = put
        self.stop = stop
        self.sampling = sampling or Sampling()
        asked = self.sampling.seed
        # a negative seed is llama.cpp's "any" (-1): the backend's own
        self.seed = seed if asked is None or asked < 0 else asked & 0xFFFFFFFF
        #: ``logit_bias`` by token id, the ids the vocabulary has (others name no token):
        #: as arrays, added in one step a token
        n_vocab = int(llama.n_vocab()) if hasattr(llama, "n_vocab") else 0
        given = [
            (int(token), float(value))
            for token, value in (self.sampling.logit_bias or {}).items()
            if token.isascii() and token.isdigit() and int(token) < n_vocab
        ]
        self.bias = bool(given)
        self._bias_ids = np.array([t for t, _ in given], dtype=np.int64)
        self._bias_values = np.array([v for _, v in given], dtype=np.float32)
        eos = int(llama.token_eos())
        self.end_token = eos if eos >= 0 else None
        #: inside a thinking block now (the prompt may have opened one)
        self.in_thinking = thinking
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.written: list[int] = []
        #: the reply's text so far, and where each written token's text ends in it
        self.text = ""
        self.ends: list[int] = []
        #: whole-vocabulary masks the grammar needed (a token it allows costs none), and
        #: the seconds the grammar took in all (checks, masks, choices): its own cost
        self.masks = 0
        self.grammar_seconds = 0.0

    def _generate(self, tokens: list[int]) -> Any:
        """llama.cpp's own sampling of ``tokens``' continuation, as the request set it (its
        defaults where it sets nothing), from the turn's seed."""
        s = self.sampling
        given: dict[str, Any] = {
            "top_k": s.top_k,
            "top_p": s.top_p,
            "min_p": s.min_p,
            "repeat_penalty": s.repetition_penalty,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
        }
        set_seed = getattr(self.llama, "set_seed", None)
        if set_seed is not None:
            set_seed(self.seed)
        options = {k: v for k, v in given.items() if v is not None}
        if self.bias:
            options["logits_processor"] = [self._biased]
        return self.llama.generate(tokens, temp=self.temperature, reset=True, **options)

    def _biased(self, ids: Any, scores: np.ndarray) -> np.ndarray:
        """The logits with the request's ``logit_bias`` added (llama.cpp's samplers run
        after: -100 all but bans a token, +100 all but forces it)."""
        del ids
        out = np.array(scores, copy=True)
        out[self._bias_ids] += self._bias_values
        return out

    def run(self) -> None:
        finish = "length"
        if self.constraint is not None and self.constraint.required:
            gen = self._generate(self.prompt)
            next(gen)  # the prompt evaluated; its free choice of a first token is not used
            gen.close()
            finish = self._constrained(self.constraint.grammar("required"), [], notice=_REQUIRED)
        else:
            finish = self._free(watch=self.constraint is not None)
        rest = self.decoder.decode(b"", final=True)
        if rest:
            self.put(rest)
        self.put((finish, len(self.written)))

    # ------------------------------------------------------------------ free

    def _free(self, *, watch: bool) -> str:
        gen = self._generate(self.prompt + self.written)
        try:
            for token in gen:
                if self.stop.is_set() or self.is_end(token):
                    return "stop"
                self._emit(token)
                if len(self.written) >= self.max_tokens:
                    return "length"
                trigger = self._trigger() if watch else None
                if trigger is not None:
                    gen.close()  # the last token is written but not yet evaluated
                    return self._from_trigger(trigger)
        finally:
            gen.close()
        return "length"

    def _trigger(self) -> Trigger | None:
        assert self.constraint is not None
        searched = self.ends[-2] if len(self.ends) > 1 else 0
        return self.constraint.trigger(self.text, searched=searched, thinking=self.in_thinking)

    def _from_trigger(self, trigger: Trigger) -> str:
        """Constrain from the token in which the call began; free again if the grammar
        refuses what was written since."""
        assert self.constraint is not None
        first = next(i for i, end in enumerate(self.ends) if end > trigger.at)
        start = self.ends[first - 1] if first else 0
        lead = self.text[start : trigger.at]
        grammar = self.constraint.grammar(trigger.form, lead)
        finish = self._constrained(grammar, self.written[first:], notice=_BEGUN)
        if finish == "refused":
            return self._free(watch=False)
        return finish

    # ------------------------------------------------------------------ constrained

    def _constrained(self, grammar: str, fed: list[int], *, notice: str) -> str:
        """Generate under ``grammar``, after feeding it ``fed`` (tokens written already, the
        last of them not yet evaluated). ``refused`` when the grammar refuses ``fed``."""
        from .constrain import GrammarSampler, Vocabulary

        if self.vocabulary is None:
            self.vocabulary = Vocabulary(self.llama)
        try:
            sampler = GrammarSampler(self.vocabulary, grammar, seed=self.seed)
        except ValueError:
            return "refused"
        with sampler:
            try:
                return self._under(sampler, fed, notice)
            finally:
                self.masks += sampler.masks

    def _under(self, sampler: GrammarSampler, fed: list[int], notice: str) -> str:
        """The constrained generation itself, ``sampler`` made."""
        from .constrain import last_logits

        for token in fed:
            if not sampler.allows(token):
                return "refused"
            sampler.accept(token)
        self.put(ev.Notice("constrained-call", notice))
        pending = fed[-1:]
        while len(self.written) < self.max_tokens:
            if self.stop.is_set():
                return "stop"
            if pending:
                self.llama.eval(pending)
            logits = last_logits(self.llama)
            if self.bias:
                logits = self._biased(None, logits)
            started = time.perf_counter()
            try:
                token = sampler.choose(
                    logits, self.temperature, end=self.end_token, sampling=self.sampling
                )
                if not self.is_end(token):
                    sampler.accept(token)
            except ValueError:  # the grammar allows nothing: the call is as far as it goes
                return "stop"
            finally:
                self.grammar_seconds += time.perf_counter() - started
            if self.is_end(token):
                return "stop"
            self._emit(token)
            pending = [token]
        return "length"

    # ------------------------------------------------------------------ text

    def _emit(self, token: int) -> None:
        self.written.append(token)
        data: bytes = self.llama.detokenize([token], special=True)
        piece = self.decoder.decode(data)
        self.text += piece
        self.ends.append(len(self.text))
        # only the new text, and what a mark may straddle, is looked at: linear in the reply
        window = self.text[max(0, len(self.text) - len(piece) - _LONGEST + 1) :]
        found = [(window.rfind(mark), opens) for mark, opens in _MARKS.items()]
        at, opens = max(found)
        if at >= 0:
            self.in_thinking = opens
        if piece:
            self.put(piece)
