"""Which grammar a chat template teaches its model, found by asking the template itself.

The probe renders one conversation twice: a user message with the generation prompt, and
the same followed by an assistant turn that calls a tool. What the second adds to the first,
cut at the end of the turn, is exactly the text the model was trained to write for that
call. A family whose parser reads that text back as the probe's call claims the template,
and the claim stands only when the family also reads back the template's own rendering of
two calls (:data:`DERIVE_CALLS`; a template that writes one call a turn, of the second
alone): one call is no proof of a grammar (a bare JSON object is Llama 3's call, a list of
two is not). That family is the template's format (``via="probe"``). Where the model's text
starts and ends is found from the template (:mod:`toolwire.formats.turn`): the end it
writes after a plain turn, and the start also from a rendering with a plain assistant turn,
for templates that write the conversation before a call otherwise than the prompt.

When no family does, the grammar is learned from the template's renderings of one call and
of two (:mod:`toolwire.formats.learn`) and kept only when the family built from it reads both
back exactly (``"derived"``). A template that renders no calls at all may still state its
format in its prompt: a family's ``prompt_markers`` shown with tools and not without claim it
(``"prompt"``); a template whose calls render in a grammar no family reads is not claimed
from its words. Otherwise the format is ``none`` (a template that ignores tools, or a grammar
that cannot be learned). No template source text is fingerprinted, so a renamed or lightly
edited template is still recognised, and a template that only looks like one is not.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..arguments import prepare_arguments
from ..errors import ArgumentsError, FormatError, LimitError, TemplateError
from ..events import TOLERANCES, Notice
from ..messages import ToolCall
from ..templates import ChatTemplate, TemplateBudget
from ..templates.shaping import CallIds
from . import registry
from .base import Family
from .derived import DerivedShape
from .learn import learn_shape
from .reasoning import opens_reasoning
from .registry import end_tokens, get_family
from .turn import PROBE_DATETIME, Plain, Start, turn_texts, with_sentinels

__all__ = [
    "DERIVE_CALLS",
    "DERIVE_TOOLS",
    "PROBE_CALL",
    "PROBE_TOOLS",
    "Detection",
    "assistant_text",
    "detect_format",
    "resolve_format",
]

PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather forecast for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city's name."},
                    "days": {"type": "integer", "description": "How many days ahead."},
                },
                "required": ["city"],
            },
        },
    }
]
PROBE_CALL = ToolCall("a1b2c3d4e", "get_weather", {"city": "Paris", "days": 3})
#: A second tool and call for learning an unknown grammar: two calls, and a boolean.
DERIVE_TOOLS: list[dict[str, Any]] = [
    *PROBE_TOOLS,
    {
        "type": "function",
        "function": {
            "name": "set_alarm",
            "description": "Set an alarm.",
            "parameters": {
                "type": "object",
                "properties": {
                    "time": {"type": "string", "description": "When, as HH:MM."},
                    "loud": {"type": "boolean", "description": "Whether it rings loudly."},
                },
                "required": ["time"],
            },
        },
    },
]
#: The second call's text holds markup, quotes and a line break: a template that escapes them
#: (CDATA, entities) writes a grammar the learned reader does not know, and is not claimed.
DERIVE_CALLS = (
    PROBE_CALL,
    ToolCall("f5g6h7i8j", "set_alarm", {"time": '07:30\n<b>"wake" & go</b>', "loud": True}),
)
_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in DERIVE_TOOLS}

#: Longest text a template may write for the probe's calls and still be read. Published
#: templates write at most some 600 characters for two calls. The families' readers cost
#: time with every marker a text holds (some 4 us a marker a family, and a detection reads
#: over a hundred texts), so a template that writes a marker hundreds of thousands of times
#: would otherwise hold detection for minutes; at this bound a detection reads for under a
#: second whatever the template writes.
MAX_CALL_CHARS = 16 * 1024

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_USER = {"role": "user", "content": "What will the weather be in Paris over the next 3 days?"}


def _turn(calls: Sequence[ToolCall], content: str | None, results: bool) -> list[dict[str, Any]]:
    """An assistant turn making ``calls``, then (``results``) a tool result for each."""
    turn: list[dict[str, Any]] = [
        {"role": "assistant", "content": content, "tool_calls": [c.to_openai() for c in calls]}
    ]
    for call in calls if results else ():
        result = {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "{}"}
        turn.append(result)
    return turn


#: End-of-turn token texts that belong to no family (the model families that write them write
#: calls in no grammar here): Gemma 2/3's ``<end_of_turn>``, Reka's ``<sep>``.
GENERIC_END_TOKENS = ("<end_of_turn>", "<sep>")
#: Where a turn ends, for templates whose end-of-turn token is not known from a GGUF file:
#: every family's declared ``end_tokens`` (formats/registry.py) and the generic ones. These
#: are token texts, not template text: they say where a turn stops, never which grammar was
#: used inside it.
COMMON_END_TOKENS = tuple(dict.fromkeys((*end_tokens(), *GENERIC_END_TOKENS)))


@dataclass(frozen=True)
class Detection:
    """What the probe found: the format's name (``"none"`` if no family fits) and why.

    ``via`` says how: ``"probe"`` (a family read the template's own rendering of the probe
    call, and of two calls), ``"derived"`` (no family did; a grammar was learned from the
    template's renderings and proved on them: ``shape``), ``"prompt"`` (the template renders
    no calls, but its prompt with tools states a family's format: a text the family declares
    in ``prompt_markers``, absent from the prompt without tools), or ``""`` for ``none``.
    """

    format: str
    #: The text the template writes for the probe call, as the model would write it.
    call_text: str = ""
    #: True when the template's generation prompt opens a thinking block.
    reasoning_open: bool = False
    #: Families that read the probe call back (normally one).
    candidates: tuple[str, ...] = ()
    #: Why a probe rendering failed, when every attempt did.
    errors: tuple[str, ...] = field(default_factory=tuple)
    via: str = ""
    #: The learned grammar, when ``via`` is ``"derived"``.
    shape: DerivedShape | None = None
    #: The template writes an assistant's calls only when its content is ``None`` (render
    #: with ``keep_call_none``): DeepSeek R1's distills.
    none_content: bool = False
    #: Where ``call_text`` was found to start: after what the generation prompt shares with
    #: the rendering (``"prompt"``), or after what a plain assistant turn shares with it
    #: (``"turn"``: a template that writes the conversation before a call otherwise).
    start: str = "prompt"
    #: Families that read the probe call but misread the template's own two calls: the claim
    #: they could not prove (``toolwire doctor`` shows why, in that family's grammar).
    unproven: tuple[str, ...] = ()

    @property
    def family(self) -> Family | None:
        if self.shape is not None:
            return self.shape.family
        return None if self.format == "none" else get_family(self.format)


def _attempts() -> Iterator[tuple[list[dict[str, Any]], str | None, bool]]:
    """(conversation before the call, the assistant's content, whether tool results follow):
    some templates insist on a system message or on a tool result after a call, and some
    write calls only when the content is None (the OpenAI wire's value beside calls)."""
    for content in ("", None):
        for head in ([], [_SYSTEM]):
            for results in (False, True):
                yield [*head, _USER], content, results


#: One detection's answers of :func:`_reads`: (family, text, opened, call ids, prose).
Read = dict[tuple[str, str, bool, tuple[str, ...], bool], bool]


def _too_long(text: str) -> str:
    """Why ``text`` is not read (longer than :data:`MAX_CALL_CHARS`), or ``""``."""
    if len(text) <= MAX_CALL_CHARS:
        return ""
    return (
        f"chat template wrote {len(text):,} characters for the probe's calls "
        f"(limit {MAX_CALL_CHARS:,}): no family or learned grammar reads it"
    )


def _reads(
    family: Family,
    text: str,
    reasoning_open: bool,
    calls: Sequence[ToolCall],
    *,
    prose: bool = False,
    seen: Read | None = None,
) -> bool:
    """Whether ``family`` reads ``text`` as exactly ``calls`` and nothing else (with
    ``prose``, text left beside the calls is allowed: the doctor names it). A text past
    :data:`MAX_CALL_CHARS` is read as nothing. ``seen`` keeps the answers of one detection:
    its attempts often render the same text, and a long one costs every family a full read.
    """
    if _too_long(text):
        return False
    if seen is None:
        return _read(family, text, reasoning_open, calls, prose)
    key = (family.name, text, reasoning_open, tuple(c.id for c in calls), prose)
    known = seen.get(key)
    if known is None:
        known = seen[key] = _read(family, text, reasoning_open, calls, prose)
    return known


def _read(
    family: Family, text: str, reasoning_open: bool, calls: Sequence[ToolCall], prose: bool
) -> bool:
    """:func:`_reads` without the bound or the memo."""
    generated = "\x00generated"
    result = family.parse(
        text, DERIVE_TOOLS, reasoning_open=reasoning_open, make_id=lambda _i: generated
    )
    if len(result.calls) != len(calls) or (result.content.strip() and not prose):
        return False
    for got, want in zip(result.calls, calls, strict=True):
        # an id is generated, the probe's own, or one the model wrote (Kimi's functions.NAME:0)
        if got.id not in (generated, want.id) and got.id not in text:
            return False
        if got.name != want.name:
            return False
        # the parser gives the arguments as written (the XML families as text): compare them
        # typed by the probe tool's schema, the one way toolwire types arguments
        try:
            done = prepare_arguments(
                got.arguments_text if got.arguments_text.strip() else got.arguments,
                _SCHEMAS[want.name],
                text_values=got.text_values,
            )
        except ArgumentsError:
            return False
        if done.arguments != want.arguments:
            return False
    return True


def _repairs(family: Family, text: str, reasoning_open: bool) -> int:
    """How many kinds of repair ``family`` names reading ``text``."""
    stream = family.stream(DERIVE_TOOLS, reasoning_open=reasoning_open)
    events = stream.feed(text) + stream.finish()
    return len({e.code for e in events if isinstance(e, Notice) and e.code in TOLERANCES})


def assistant_text(
    template: ChatTemplate,
    before: Sequence[Mapping[str, Any]],
    turn: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    call_ids: CallIds = "keep",
    keep_call_none: bool = False,
    budget: TemplateBudget | None = None,
    start: Start = "auto",
) -> tuple[str, bool]:
    """The text a template puts in the model's mouth for ``turn``, and whether it starts
    inside a thinking block the generation prompt opened.

    ``before`` is rendered with the generation prompt, ``before + turn`` without (with
    ``keep_call_none``, a ``None`` content beside calls reaches the template as ``None``); what the
    second adds, cut at the end of the turn, is what the model writes. The end of a turn is
    learned from the template (what it writes after a plain reply), with known token texts
    beside it. ``start="turn"`` takes the start from a rendering with a plain assistant turn
    instead (what a plain turn and this one share is the template's, not the model's);
    ``"auto"`` (the default) does so only when the generation prompt's diff would start inside
    the last message of ``before`` (a template that writes the conversation before a call
    otherwise). A turn that starts with the closer of a thinking block the generation prompt
    opened starts inside that block. Raises :class:`~toolwire.errors.TemplateError` or
    :class:`~toolwire.errors.LimitError` when the template refuses either conversation. Every
    render spends ``budget`` (a fresh one for the call when none is given).
    """
    texts = turn_texts(
        template,
        before,
        turn,
        tools,
        call_ids=call_ids,
        keep_call_none=keep_call_none,
        budget=budget if budget is not None else TemplateBudget(),
        memo={},
        known_ends=COMMON_END_TOKENS,
    )
    chosen = next((t for t in texts if t[2] == start), texts[0])
    return chosen[0], chosen[1]


def _proven(
    template: ChatTemplate,
    family: Family,
    attempt: tuple[list[dict[str, Any]], str | None, bool],
    start: str,
    budget: TemplateBudget,
    memo: Plain,
    seen: Read,
) -> bool:
    """Whether ``family``'s claim on the template stands: it reads back the template's own
    rendering of both :data:`DERIVE_CALLS`, asked for as the probe was (``attempt``,
    ``start``), as exactly those calls (text the template writes beside them may stay text).

    A template that writes both calls must be read as both (one call a message or not: it
    teaches its model to write two). One that writes only the first of them, or refuses two
    calls in a turn, teaches one call a turn: then the proof is the second call (markup,
    quotes, a line break, a boolean) rendered alone. A template that refuses to render the
    proof's conversation at all (two tools, say) cannot refute the probe: the claim stands on
    the probe's reading. Only a rendering the family misreads refutes it.
    """
    before, content, results = attempt

    def rendered(calls: Sequence[ToolCall]) -> tuple[str, bool]:
        texts = turn_texts(
            template,
            before,
            _turn(calls, content, results),
            DERIVE_TOOLS,
            call_ids=family.call_ids,
            keep_call_none=content is None,
            budget=budget,
            memo=memo,
            known_ends=COMMON_END_TOKENS,
        )
        chosen = next((t for t in texts if t[2] == start), texts[0])
        return chosen[0], chosen[1]

    try:
        text, opened = rendered(DERIVE_CALLS)
        if all(c.name in text for c in DERIVE_CALLS):
            return _reads(family, text, opened, DERIVE_CALLS, prose=True, seen=seen)
    except (TemplateError, LimitError):
        if budget.exhausted:
            return False
    try:
        text, opened = rendered(DERIVE_CALLS[1:])
    except (TemplateError, LimitError):
        return not budget.exhausted
    if DERIVE_CALLS[1].name not in text:
        return False  # it writes the probe's call and not this one: nothing it writes is proof
    return _reads(family, text, opened, DERIVE_CALLS[1:], prose=True, seen=seen)


def _probe(template: ChatTemplate, families: Sequence[Family], budget: TemplateBudget) -> Detection:
    errors: list[str] = []
    rendered = False
    shows_calls = False
    first_text = ""
    first_open = False
    memo: Plain = {}
    seen: Read = {}
    too_long = ""
    refuted: list[str] = []
    probe = with_sentinels(template)
    for attempt in _attempts():
        before, content, results = attempt
        try:
            texts = turn_texts(
                template,
                before,
                _turn([PROBE_CALL], content, results),
                PROBE_TOOLS,
                call_ids="keep",
                keep_call_none=content is None,
                budget=budget,
                memo=memo,
                known_ends=COMMON_END_TOKENS,
            )
            prompt_opens = opens_reasoning(
                probe.render(
                    before,
                    PROBE_TOOLS,
                    add_generation_prompt=True,
                    datetime=PROBE_DATETIME,
                    budget=budget,
                )
            )
        except (TemplateError, LimitError) as exc:
            errors.append(str(exc))
            if budget.exhausted:  # every later attempt would be refused at once
                return Detection("none", "", False, (), tuple(errors))
            continue
        rendered = True
        for text, reasoning_open, start in texts:
            if _too_long(text):  # calls in no grammar anything here reads: not claimed by words
                too_long, shows_calls = _too_long(text), True
                continue
            shows_calls = shows_calls or PROBE_CALL.name in text
            found = [
                fam
                for fam in families
                if _reads(fam, text, reasoning_open, [PROBE_CALL], seen=seen)
            ]
            # a family that reads the probe call claims the template only once it reads the
            # template's own two calls too: one call is no proof of a grammar
            proven = tuple(
                fam.name
                for fam in found
                if _proven(template, fam, attempt, start, budget, memo, seen)
            )
            refuted += [fam.name for fam in found if fam.name not in (*proven, *refuted)]
            if proven:
                # the family that reads it with the fewest repairs claims it: its own grammar
                # before a family's tolerance of it (LFM2's list without its token is Llama
                # 4's list)
                by_name = {fam.name: fam for fam in found}
                proven = tuple(
                    sorted(proven, key=lambda n: _repairs(by_name[n], text, reasoning_open))
                )
                return Detection(
                    proven[0],
                    text,
                    prompt_opens,
                    proven,
                    via="probe",
                    none_content=content is None,
                    start=start,
                )
            if budget.exhausted:
                return Detection("none", "", False, (), tuple(errors))
        if not first_text and texts and not _too_long(texts[0][0]):
            first_text, first_open = texts[0][0], prompt_opens
    unproven = tuple(refuted)
    derived = _derive(template, budget, memo, seen)
    if derived is not None:
        return replace(derived, unproven=unproven)
    # a prompt states a format only for a template that shows no calls: one whose calls
    # render in a grammar no family read is not claimed from its words
    claimed = None if shows_calls else _prompt_claim(template, families, budget)
    if claimed is not None:
        return Detection(claimed, first_text, first_open, (claimed,), via="prompt")
    if too_long:  # the reason no family could read what the template wrote
        return Detection("none", first_text, first_open, errors=(too_long,), unproven=unproven)
    if rendered:  # an attempt the template refused is no error when another rendered
        return Detection("none", first_text, first_open, unproven=unproven)
    return Detection("none", "", False, (), tuple(errors))


def _derive(
    template: ChatTemplate, budget: TemplateBudget, memo: Plain, seen: Read
) -> Detection | None:
    """Learn the grammar from renderings of one and of two calls, and keep it only when its
    family reads both renderings back exactly."""
    for before, content, results in _attempts():
        if results or budget.exhausted:  # a tool's turn would be learned as the calls' end
            continue
        none = content is None
        try:
            ones, twos = (
                turn_texts(
                    template,
                    before,
                    _turn(calls, content, results),
                    DERIVE_TOOLS,
                    call_ids="keep",
                    keep_call_none=none,
                    budget=budget,
                    memo=memo,
                    known_ends=COMMON_END_TOKENS,
                )
                for calls in (DERIVE_CALLS[:1], DERIVE_CALLS)
            )
            prompt = with_sentinels(template).render(
                before,
                DERIVE_TOOLS,
                add_generation_prompt=True,
                datetime=PROBE_DATETIME,
                budget=budget,
            )
        except (TemplateError, LimitError):
            continue
        for one, opened, start in ones:
            two, opened_two, _ = next((t for t in twos if t[2] == start), twos[0])
            if _too_long(one) or _too_long(two):  # the learner and readers run on bounded text
                continue
            shape = learn_shape(one, two, DERIVE_CALLS)
            if shape is None:
                continue
            family = shape.family
            if _reads(family, one, opened, DERIVE_CALLS[:1], seen=seen) and _reads(
                family, two, opened_two, DERIVE_CALLS, seen=seen
            ):
                return Detection(
                    "derived",
                    one,
                    opens_reasoning(prompt),
                    ("derived",),
                    via="derived",
                    shape=shape,
                    none_content=none,
                    start=start,
                )
    return None


def _prompt_claim(
    template: ChatTemplate, families: Sequence[Family], budget: TemplateBudget
) -> str | None:
    """The family whose ``prompt_markers`` the prompt with tools shows and the prompt without
    tools does not: a template that renders no calls but states the format in words."""
    claimants = [fam for fam in families if fam.prompt_markers]
    if not claimants:
        return None
    probe = with_sentinels(template)
    for before in ([_USER], [_SYSTEM, _USER]):
        try:
            told = probe.render(before, PROBE_TOOLS, datetime=PROBE_DATETIME, budget=budget)
            plain = probe.render(before, None, datetime=PROBE_DATETIME, budget=budget)
        except (TemplateError, LimitError):
            continue
        for fam in claimants:
            if any(m in told and m not in plain for m in fam.prompt_markers):
                return fam.name
    return None


_CACHE: OrderedDict[tuple[str, str, str, tuple[str, ...], str], Detection] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.Lock()


def detect_format(
    template: ChatTemplate,
    *,
    families: Sequence[Family] | None = None,
    budget: TemplateBudget | None = None,
) -> Detection:
    """Detect the template's tool-call family (cached by the template's hash and tokens).

    ``families`` replaces the registered families (not cached): ``families=()`` asks for a
    learned grammar alone, as a test of derivation on templates a family already reads.

    Every render of one detection spends one ``budget`` (a fresh
    :class:`~toolwire.templates.TemplateBudget` when none is given): a template gets the
    time and memory of one operation however many renders detection makes. Pass the budget
    of a larger operation (``toolwire render`` detects, then renders) to share it. A detection
    cut short by its budget is ``none`` with the refusals in ``errors``, and is not cached.
    """
    budget = budget if budget is not None else TemplateBudget()
    if families is not None:
        return _probe(template, tuple(families), budget)
    variables = repr(sorted(template.variables.items()))  # they may change what renders
    key = (
        template.sha256,
        template.bos_token,
        template.eos_token,
        tuple(template.end_tokens),
        variables,
    )
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    found = _probe(template, tuple(registry.families()), budget)
    if budget.exhausted:  # cut short: another try with a fresh budget may find more
        return found
    with _LOCK:
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return found


def resolve_format(setting: str, template: ChatTemplate | None = None) -> Family | None:
    """The family a ``tool_format`` setting means: ``auto`` detects, ``none`` is None.

    ``auto`` without a template is an error, as is an unknown name.
    """
    if setting == "none":
        return None
    if setting == "auto":
        if template is None:
            raise FormatError("tool_format 'auto' needs the model's chat template")
        return detect_format(template).family
    return get_family(setting)
