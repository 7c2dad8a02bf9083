"""Detection stays bounded whatever a template writes for a call.

A template that writes a family's marker hundreds of thousands of times where a call goes
once held ``toolwire detect`` for minutes: every family's reader walked every marker, for
every attempt of the probe. The probe now reads only texts up to ``MAX_CALL_CHARS`` and
says why it read nothing past it. These tests run the real detection (no cache) on such
templates, at two sizes, check the answer is ``none`` with a reason, and count its work
rather than time it (see :mod:`tests.work_count`): the characters the families' readers and
the grammar learner are given, the calls the detection makes, the bytes the template builds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from toolwire import ChatTemplate
from toolwire.formats import detect, registry
from toolwire.formats.detect import MAX_CALL_CHARS, Detection, detect_format
from toolwire.templates import TemplateBudget

from .work_count import calls_made


@dataclass
class Work:
    """What one detection did: characters given to the readers and the learner (and the
    longest text one was given), function calls made, bytes the template built."""

    read: int = 0
    longest: int = 0
    calls: int = 0
    built: int = 0

    def reading(self, *texts: str) -> None:
        self.read += sum(map(len, texts))
        self.longest = max(self.longest, *map(len, texts))
        # at once: an unbounded reader would go on for minutes
        assert self.longest <= MAX_CALL_CHARS, f"a reader was given {self.longest:,} characters"


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    """The work of the detection running now: every text handed to a family's reader
    (``_read``, ``_repairs``) or to the grammar learner (``learn_shape``) is counted."""
    current = Work()
    read, repairs, learn = detect._read, detect._repairs, detect.learn_shape

    def counted_read(family: Any, text: str, *rest: Any) -> bool:
        current.reading(text)
        return read(family, text, *rest)

    def counted_repairs(family: Any, text: str, *rest: Any) -> int:
        current.reading(text)
        return repairs(family, text, *rest)

    def counted_learn(one: str, two: str, *rest: Any) -> Any:
        current.reading(one, two)
        return learn(one, two, *rest)

    monkeypatch.setattr(detect, "_read", counted_read)
    monkeypatch.setattr(detect, "_repairs", counted_repairs)
    monkeypatch.setattr(detect, "learn_shape", counted_learn)
    yield current


def _template(calls: str) -> ChatTemplate:
    """A plain chat template that writes ``calls`` (Jinja) where a turn holds tool calls."""
    return ChatTemplate(
        "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n"
        "{% if m.tool_calls %}" + calls + "{% endif %}{% endfor %}"
        "{%- if add_generation_prompt %}assistant: {% endif %}"
    )


def _loops(marker: str) -> object:
    """``marker`` written ``n`` times by nested loops (a single ``range`` is capped)."""
    return lambda n: _template(
        f"{{% for i in range({n // 1000}) %}}{{% for j in range(1000) %}}{marker}"
        "{% endfor %}{% endfor %}"
    )


def _repeat(text: str) -> object:
    """``text`` repeated ``n`` times by the ``*`` operator."""
    quoted = text.replace("'", "\\'")
    return lambda n: _template(f"{{{{ '{quoted}' * {n} }}}}")


def _counted(template: ChatTemplate, work: Work) -> tuple[Detection, Work]:
    """A detection without the cache (``families`` given), and its work (``work`` is
    counted afresh)."""
    work.read = work.longest = 0
    budget = TemplateBudget()
    found, work.calls = calls_made(
        lambda: detect_format(template, families=tuple(registry.families()), budget=budget)
    )
    work.built = budget.max_bytes - budget.bytes_left
    return found, Work(work.read, work.longest, work.calls, work.built)


def _everywhere(text: str) -> object:
    """``text`` repeated ``n`` times after every message, calls or not."""
    return lambda n: ChatTemplate(
        "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n"
        f"{{{{ '{text}' * {n} }}}}{{% endfor %}}"
        "{%- if add_generation_prompt %}assistant: {% endif %}"
    )


CASES = {
    # 200,000 <tool_call> markers from loops: the loop budget refuses them
    "loops-tool_call": (_loops("<tool_call>"), 200_000),
    # 1,000,000 by `*`: past the largest string a template may build
    "repeat-tool_call-million": (_repeat("<tool_call>"), 1_000_000),
    # 150,000 by `*` (3.3 MB at twice): inside the render limits, read by nothing
    "repeat-tool_call": (_repeat("<tool_call>"), 150_000),
    # written after every message: the renderings are long, what a call adds is not
    "everywhere-tool_call": (_everywhere("<tool_call>"), 40_000),
    # another family's markers, in pairs that each look like a call
    "repeat-mistral": (_repeat('[TOOL_CALLS][{"name": "get_weather"}]'), 40_000),
    "repeat-python_tag": (
        _repeat('<|python_tag|>{"name": "get_weather", "parameters": {}};'),
        30_000,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_template_that_floods_its_calls_is_none_quickly(name: str, work: Work) -> None:
    make, n = CASES[name]
    _counted(make(n // 10), work)  # warm: imports, compiled families and caches counted once
    small, small_work = _counted(make(n), work)
    large, large_work = _counted(make(2 * n), work)
    for found in (small, large):
        assert found.format == "none"
        assert found.errors, "a detection that reads nothing says why"
        assert len(found.call_text) <= MAX_CALL_CHARS
    # no reader is given a text past the bound (:meth:`Work.reading` fails at once), so what
    # they read does not grow with the markers (the unbounded detection read every marker,
    # for every family and attempt)
    assert large_work.read <= small_work.read, (small_work, large_work)
    # nothing walks the markers one by one: twice the markers, about as many calls (what
    # the template computes is bounded by its budget; a walk would double the count)
    assert large_work.calls < 1.5 * small_work.calls, (small_work, large_work)
    # and what the template builds grows with what it writes, never with a product of it
    assert large_work.built < 2.5 * small_work.built + 1_000_000, (small_work, large_work)


def test_the_reason_names_the_bound(work: Work) -> None:
    found, _ = _counted(_repeat("<tool_call>")(150_000), work)
    assert any(f"limit {MAX_CALL_CHARS:,}" in e for e in found.errors), found.errors
