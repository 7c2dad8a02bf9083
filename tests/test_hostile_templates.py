"""A corpus of hostile chat templates: each ends fast with a clear error, and within bounds.

``tests/fixtures/hostile_templates`` holds one template per file, its comment saying what it
tries; the name's prefix says the kind: ``esc`` (escape the sandbox or change the caller's
data), ``file`` (read a file), ``cpu`` (burn time) and ``mem`` (exhaust memory). Every
template must end with a :class:`~toolwire.errors.TemplateError` within its budget's second
of rendering (and what a loaded machine adds to it: :data:`SECONDS`), and a process
rendering the whole corpus must stay under 300 MB at its peak. Detection, which renders a
template dozens of times, is held to a few budgets' worth of work, counted (steps and bytes
charged), not timed.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

import toolwire
from toolwire.cli import main
from toolwire.errors import LimitError, TemplateError, TemplateLimitError
from toolwire.formats.detect import detect_format
from toolwire.templates import ChatTemplate, TemplateBudget, load_template
from toolwire.templates.budget import MAX_ITERATIONS, MAX_RENDER_BYTES

CORPUS_DIR = Path(__file__).parent / "fixtures" / "hostile_templates"
CORPUS = sorted(CORPUS_DIR.glob("*.jinja"))
MESSAGES = [{"role": "user", "content": "hi"}]
MARKER = Path("/tmp/toolwire-hostile-marker")
#: What each template may take, end to end: the budget's default of one second of rendering
#: is what ends the templates that burn time, and a loaded machine adds to it (the last step
#: before the clock is read, the cleanup after). A template that escaped its budget would
#: run for minutes.
SECONDS = 5.0
#: The peak a process rendering the whole corpus may reach.
PEAK_MB = 300

#: The attacks issue 13 reproduced, each of which must be in the corpus.
FROM_THE_ISSUE = [
    "mem-str-format-width",
    "mem-ljust",
    "mem-zfill",
    "mem-expandtabs",
    "mem-percent-width",
    "mem-format-filter-width",
    "mem-replace",
    "mem-join-500x4mb",
    "mem-tojson-indent",
    "mem-fromkeys-tojson",
    "cpu-lipsum",
    "cpu-slice",
    "cpu-squaring",
]


class Charged:
    """What the template budgets made during a test let through: loop steps and bytes, by
    budget (what a budget refused is not counted: it never ran)."""

    def __init__(self) -> None:
        self.budgets: dict[int, TemplateBudget] = {}  # kept alive: their ids stay theirs
        self.steps: dict[int, int] = {}
        self.bytes: dict[int, int] = {}

    def add(self, budget: TemplateBudget, into: dict[int, int], amount: int) -> None:
        self.budgets[id(budget)] = budget
        into[id(budget)] = into.get(id(budget), 0) + amount

    def clear(self) -> None:
        for kept in (self.budgets, self.steps, self.bytes):
            kept.clear()


@pytest.fixture
def charged(monkeypatch: pytest.MonkeyPatch) -> Iterator[Charged]:
    record = Charged()
    spend, charge = TemplateBudget.spend, TemplateBudget.charge

    def counted_spend(self: TemplateBudget, units: int = 1) -> None:
        spend(self, units)
        record.add(self, record.steps, units)

    def counted_charge(self: TemplateBudget, size: int, what: str) -> None:
        charge(self, size, what)
        record.add(self, record.bytes, size)

    monkeypatch.setattr(TemplateBudget, "spend", counted_spend)
    monkeypatch.setattr(TemplateBudget, "charge", counted_charge)
    yield record


#: The budgets' worth of work a detection may spend: its own, shared by its dozens of
#: renders, and that of the small probe render a template instance makes once, in a budget
#: of its own, to learn where it takes its tools. A budget for each render would be dozens.
DETECTION_BUDGETS = 2
#: The budgets' worth the render command spends on a template that exhausts every budget:
#: its own (shared by detection and the prompt), the render that learns where the template
#: puts a system message (a budget of its own), and the tools probe of each of its two
#: detections (the first, cut short, is not cached). A budget for each render would be dozens.
RENDER_COMMAND_BUDGETS = 4


def _within(charged: Charged, budgets: int) -> None:
    """What the budgets let through is at most ``budgets`` budgets' worth."""
    assert charged.budgets, "nothing was rendered"
    assert sum(charged.steps.values()) <= budgets * MAX_ITERATIONS, charged.steps
    assert sum(charged.bytes.values()) <= budgets * MAX_RENDER_BYTES, charged.bytes


def test_the_corpus_is_large_and_covers_every_kind_and_the_issue() -> None:
    names = [path.stem for path in CORPUS]
    assert len(names) >= 50
    for kind in ("esc", "file", "cpu", "mem"):
        assert sum(name.startswith(kind + "-") for name in names) >= 5, kind
    assert set(FROM_THE_ISSUE) <= set(names)


@pytest.mark.parametrize("path", CORPUS, ids=[path.stem for path in CORPUS])
def test_each_hostile_template_ends_fast_with_a_clear_error(path: Path) -> None:
    MARKER.unlink(missing_ok=True)
    template = load_template(path)
    messages = copy.deepcopy(MESSAGES)
    start = time.monotonic()
    with pytest.raises(TemplateError) as caught:
        template.render(messages)
    took = time.monotonic() - start
    assert took <= SECONDS, f"{path.stem} took {took:.2f} s"
    # the message names the template, and says what was refused
    assert str(caught.value).startswith(path.stem)
    assert len(str(caught.value)) > len(path.stem) + 10
    if path.stem.startswith(("cpu-", "mem-")):
        assert isinstance(caught.value, TemplateLimitError)
        assert isinstance(caught.value, LimitError)
    assert not MARKER.exists()
    assert messages == MESSAGES


_PEAK_SCRIPT = """
import json, sys, time
from pathlib import Path
from toolwire.errors import TemplateError
from toolwire.templates import load_template


def high_water_kb():
    # this process's own peak: ru_maxrss would also count the parent's, which a child
    # started by vfork and exec inherits on Linux
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")


before = high_water_kb()
outcomes = {}
for path in sorted(Path(sys.argv[1]).glob("*.jinja")):
    start = time.monotonic()
    try:
        load_template(path).render([{"role": "user", "content": "hi"}])
        outcome = "rendered"
    except TemplateError as exc:
        outcome = type(exc).__name__
    outcomes[path.stem] = [outcome, time.monotonic() - start]
peak = high_water_kb()
print(json.dumps({"before_kb": before, "peak_kb": peak, "outcomes": outcomes}))
"""


def test_the_whole_corpus_in_one_process_stays_under_the_peak() -> None:
    # A fresh process, so that this one's history does not count; its peak in KiB.
    src = Path(toolwire.__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(CORPUS_DIR)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["peak_kb"] < PEAK_MB * 1024, report["peak_kb"]
    assert len(report["outcomes"]) == len(CORPUS)
    for name, (outcome, seconds) in report["outcomes"].items():
        assert outcome.startswith("Template"), (name, outcome)
        assert seconds <= SECONDS, (name, seconds)


def test_a_refused_value_is_freed_at_once() -> None:
    # fresh 4 MB strings kept in a list until the budget refuses: after the error, nothing
    # the template built is alive, without waiting for the garbage collector
    template = load_template(CORPUS_DIR / "mem-retain-append.jinja")
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            with pytest.raises(TemplateLimitError, match="bytes of values"):
                template.render(MESSAGES)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        gc.enable()
    assert peak - base > 32 * 2**20  # it did build a lot
    assert current - base < 2 * 2**20, current - base


def test_a_refused_value_in_a_macro_frame_is_freed_too() -> None:
    source = (
        "{% set big = 'x' * 4000000 %}{% macro m(s) %}{{ s ~ s }}{{ m(s ~ 'y') }}{% endmacro %}"
        "{{ m(big[:3000000]) }}"
    )
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with pytest.raises(TemplateLimitError):
            ChatTemplate(source).render([])
        current = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert current - base < 2 * 2**20, current - base


def test_a_gguf_with_a_hostile_template_is_refused_and_freed(
    tmp_path: Path, charged: Charged
) -> None:
    # what a local model's file carries goes through the same sandbox: detection (as the
    # local backend runs it), then renders, each refused and freed at once
    path = tmp_path / "hostile.gguf"
    writer = GGUFWriter(path, "llama")
    writer.add_chat_template((CORPUS_DIR / "mem-retain-append.jinja").read_text())
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    template = load_template(path)
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert detect_format(template).format == "none"
        _within(charged, DETECTION_BUDGETS)  # its dozens of renders share one
        for _ in range(4):
            with pytest.raises(TemplateLimitError):
                template.render(MESSAGES)
        current = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        gc.enable()
    assert current - base < 2 * 2**20, current - base


def test_one_budget_is_shared_by_the_renders_given_it() -> None:
    loop = ChatTemplate("{% for i in range(40) %}{% endfor %}")
    budget = TemplateBudget(iterations=100)
    loop.render([], budget=budget)  # 80 steps: the loop and the range, 40 each
    with pytest.raises(TemplateLimitError, match="100 loop iterations"):
        loop.render([], budget=budget)
    assert budget.exhausted
    with pytest.raises(TemplateLimitError):  # once spent, it refuses at once
        ChatTemplate("hello").render([], budget=budget)
    assert loop.render([]) == ""  # without one, each render has its own


def test_a_budget_counts_memory_across_renders() -> None:
    build = ChatTemplate("{{ ('x' * 1000000) | length }}")
    budget = TemplateBudget(memory=3 * 10**6)
    assert build.render([], budget=budget) == "1000000"
    assert build.render([], budget=budget) == "1000000"
    with pytest.raises(TemplateLimitError, match="3,000,000 bytes"):
        build.render([], budget=budget)


def test_the_budget_clock_runs_only_while_rendering() -> None:
    budget = TemplateBudget(seconds=0.2)
    time.sleep(0.3)  # the caller's own work is not the template's
    assert ChatTemplate("ok").render([], budget=budget) == "ok"
    assert budget.used < 0.2 and not budget.exhausted


def test_detection_spends_one_budget_and_is_not_cached_when_cut_short(charged: Charged) -> None:
    template = load_template(CORPUS_DIR / "cpu-nested-loops.jinja")
    for _ in range(2):  # not cached: the second detection runs again, as costly
        charged.clear()
        found = detect_format(template)
        _within(charged, DETECTION_BUDGETS)
        assert charged.steps, "cached: nothing ran"
        assert found.format == "none"
        assert found.errors and "in one operation" in found.errors[-1]


def test_the_render_command_spends_one_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], charged: Charged
) -> None:
    # detection renders the template dozens of times, then the prompt once: together, one
    # budget (it used to be ten seconds per render)
    (tmp_path / "m.json").write_text(json.dumps(MESSAGES))
    path = CORPUS_DIR / "cpu-nested-loops.jinja"
    code = main(["render", str(path), "--messages", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert code == 2 and "toolwire: error: cpu-nested-loops" in err
    _within(charged, RENDER_COMMAND_BUDGETS)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # what the checks let through renders as Jinja renders it
        (
            "{{ 'a'.ljust(5, '*') }}|{{ '7'.zfill(3) }}|{{ 'x\\ty'.expandtabs(4) }}",
            "a****|007|x   y",
        ),
        ("{{ '%5d|%-3s|%.2f' % (42, 'a', 1.5) }}", "   42|a  |1.50"),
        ("{{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }}", "1-2"),
        ("{{ '{0:>{1}}|{x:^5}'.format(7, 3, x='m') }}", "  7|  m  "),
        ("{{ '{a}'.format_map({'a': 'b'}) }}", "b"),
        ("{{ '%s!' | format('hi') }}|{{ 'abc' | replace('b', 'BB') }}", "hi!|aBBc"),
        (
            "{{ 'a,b,,c'.split(',') }}|{{ 'a b'.split() }}|{{ 'a,b,c'.split(',', 1) }}",
            "['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']",
        ),
        ("{{ '-'.join(['a', 'b']) }}|{{ [1, 2] | join('+') }}", "a-b|1+2"),
        ("{{ [{'a': 'x'}, {'a': 'y'}] | join(',', attribute='a') }}", "x,y"),
        ("{{ [[1], [2, 3]] | sum(start=[]) }}|{{ [1, 2, 3] | sum }}", "[1, 2, 3]|6"),
        ("{{ {'a': [1, 2]} | tojson(indent=2) }}", '{\n  "a": [\n    1,\n    2\n  ]\n}'),
        (
            "{{ 'abcdef'[1:4] }}|{{ [1, 2, 3][::-1] }}|{{ range(10)[2:5] | list }}",
            "bcd|[3, 2, 1]|[2, 3, 4]",
        ),
        ("{{ 3 * 4 }}|{{ 2 ** 10 }}|{{ 'ab' * 2 }}|{{ [0] * 2 }}", "12|1024|abab|[0, 0]"),
        ("{{ [1, 2, 3, 4, 5] | batch(2, 0) | list }}", "[[1, 2], [3, 4], [5, 0]]"),
        ("{{ [1, 2, 3] | slice(2) | list }}", "[[1, 2], [3]]"),
        ("{% set x %}a{{ 1 }}b{% endset %}{{ x }}|{{ 'a\\nb' | indent(2, true) }}", "a1b|  a\n  b"),
        (
            "{{ dict.fromkeys(['a', 'b'], 0) }}|{{ (1).to_bytes(2, 'big') }}",
            "{'a': 0, 'b': 0}|b'\\x00\\x01'",
        ),
        (
            "{{ '<a>' | e }}|{{ [1, 'x', none] }}|{{ lipsum(1, false, 3, 4) | length > 0 }}",
            "&lt;a&gt;|[1, 'x', None]|True",
        ),
        (
            "{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'ab'.translate({97: 'xy'}) }}",
            "['a', 'b', 'c']|xyb",
        ),
    ],
)
def test_ordinary_uses_render_as_jinja_does(source: str, expected: str) -> None:
    assert ChatTemplate(source).render([]) == expected
