"""Every family's grammar takes every form its writer writes (``Family.samples``), from
where its trigger fires as a model writes, with the sample's arguments and with a string
argument long enough for llguidance's limits; argument tags that share their opening; and
start patterns that never take prose for a call. Matched with llguidance, the engine that
constrains local generation."""

from __future__ import annotations

from toolwire import family_names, get_family
from toolwire.formats.gbnf import Constraint, Trigger, constraint_for

from .test_grammars import matches, without_ends


def test_every_family_s_grammar_takes_its_own_samples() -> None:
    """Every form a family writes (``Family.samples``: LFM2's JSON object after its marker and
    a line break among them) is taken by the family's grammar from where its trigger fires:
    with the sample's arguments, and with a string argument of 6,000 characters (a file
    written whole: llguidance refuses a row of more than 2,000 items, which a value read
    through a right-recursive rule reached at its 2,000th character)."""
    from toolwire.formats.samples import SAMPLE_TOOLS, sample_arguments

    refused = []
    for name in family_names():
        constraint = constraint_for(name, SAMPLE_TOOLS)
        if constraint is None:
            continue
        family = get_family(name)
        long = {**sample_arguments(0), "content": "x = a < b and y\n" * 400}
        for i in range(len(family.samples)):
            for arguments in (None, long):
                text = family.sample(i, arguments=arguments)
                trigger = as_generated(constraint, text)
                assert trigger is not None, (name, i, text[:80])
                block = without_ends(text[trigger.at :], family.end_tokens)
                if not matches(constraint.grammar(trigger.form), block):
                    refused.append((name, i, len(text)))
    assert refused == []


def as_generated(constraint: Constraint, text: str) -> Trigger | None:
    """Where the constraint takes over ``text`` written a character at a time, as the local
    engine asks it while a model writes."""
    for k in range(1, len(text) + 1):
        trigger = constraint.trigger(text[:k], searched=k - 1)
        if trigger is not None:
            return trigger
    return None


def test_a_string_argument_then_a_typed_one_in_tags() -> None:
    """A string argument's raw text, then an integer one, in a form whose argument tags
    share their opening text (``<parameter name="K">``): llguidance read the shared opening
    as the start of the integer argument's one lexeme and refused the string's key."""
    tools = [
        {
            "name": "w",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "m": {"type": "integer"}},
            },
        }
    ]
    constraint = constraint_for("minimax", tools)
    assert constraint is not None
    tag = '<parameter name="{}">{}</parameter>'
    head = '<minimax:tool_call><invoke name="w">'
    tail = "</invoke></minimax:tool_call>"
    family = constraint.grammar("family")
    assert matches(family, head + tag.format("a", "x") + tag.format("m", "4") + tail)
    assert matches(family, head + tag.format("m", "4") + tail)
    assert not matches(family, head + tag.format("m", "x") + tail)
    assert not matches(family, head + tag.format("m", "4") + tag.format("a", "x") + tail)


def test_prose_that_begins_with_a_tool_s_name_is_no_start() -> None:
    """Functionary v3.2 starts a reply with ``NAME\\n``: prose opening with the same word
    (``search results show…``) is no call, and the grammar is not started on it."""
    tools = [{"name": "search", "parameters": {"type": "object", "properties": {}}}]
    constraint = constraint_for("functionary-v3.2", tools)
    assert constraint is not None
    for prose in ("search", "searching the web", "search results show"):
        assert as_generated(constraint, prose) is None, prose
