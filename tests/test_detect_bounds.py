"""Detection stays bounded whatever a template writes for a call.

A template that writes a family's marker hundreds of thousands of times where a call goes
once held ``toolwire detect`` for minutes: every family's reader walked every marker, for
every attempt of the probe. The probe now reads only texts up to ``MAX_CALL_CHARS`` and
says why it read nothing past it; these tests time the real detection (no cache) on such
templates, at two sizes, and check the answer is ``none`` with a reason.
"""

from __future__ import annotations

import time

import pytest

from toolwire import ChatTemplate
from toolwire.formats import registry
from toolwire.formats.detect import MAX_CALL_CHARS, Detection, detect_format

#: Well above what a loaded two-core machine needs (a bounded detection takes well under
#: two seconds); the unbounded one took minutes.
LIVENESS_SECONDS = 8.0


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


def _timed(template: ChatTemplate) -> tuple[Detection, float]:
    """A detection without the cache (``families`` given), and its wall time."""
    start = time.monotonic()
    found = detect_format(template, families=tuple(registry.families()))
    return found, time.monotonic() - start


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
def test_a_template_that_floods_its_calls_is_none_quickly(name: str) -> None:
    make, n = CASES[name]
    _timed(make(n // 10))  # warm: imports and compiled families are not the template's cost
    small, small_time = _timed(make(n))
    large, large_time = _timed(make(2 * n))
    for found in (small, large):
        assert found.format == "none"
        assert found.errors, "a detection that reads nothing says why"
        assert len(found.call_text) <= MAX_CALL_CHARS
    assert large_time < LIVENESS_SECONDS
    # twice the markers costs at most about twice the time (never a product of them)
    assert large_time < 3 * small_time + 0.25, (small_time, large_time)


def test_the_reason_names_the_bound() -> None:
    found, _ = _timed(_repeat("<tool_call>")(150_000))
    assert any(f"limit {MAX_CALL_CHARS:,}" in e for e in found.errors), found.errors
