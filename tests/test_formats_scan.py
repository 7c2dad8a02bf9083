"""The one marker scanner every reader uses, against a plain reference written the slow way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolwire.formats.scan import Markers

MARKER_SETS = [
    ("<tool_call>",),
    ("<tool_call>", "<function=", "```", "<tool_response>"),
    ("</think>", "[/THINK]"),
    ("\r\n</parameter>", "\n</parameter>", "</parameter>"),
    ("ab", "abab", "b"),
]


def first(text: str, markers: tuple[str, ...], start: int) -> tuple[int, str]:
    """The earliest marker, the longest where two start at the same place."""
    found = [(text.find(m, start), -len(m), m) for m in markers if text.find(m, start) >= 0]
    if not found:
        return -1, ""
    j, _, m = min(found)
    return j, m


def held(text: str, markers: tuple[str, ...], start: int) -> int:
    rest = text[start:]
    return max(
        (k for m in markers for k in range(1, len(m)) if k <= len(rest) and rest.endswith(m[:k])),
        default=0,
    )


ALPHABET = st.sampled_from(["<", "/", "t", "o", "l", "_", "c", "a", "b", ">", "\n", "\r", "`", "x"])


@settings(max_examples=500, deadline=None)
@given(
    markers=st.sampled_from(MARKER_SETS),
    pieces=st.lists(
        st.sampled_from(
            [m for ms in MARKER_SETS for m in ms] + [m[:3] for ms in MARKER_SETS for m in ms]
        )
        | st.text(ALPHABET, max_size=3),
        max_size=12,
    ),
    start=st.integers(0, 40),
)
def test_find_scan_and_held_agree_with_the_reference(
    markers: tuple[str, ...], pieces: list[str], start: int
) -> None:
    text = "".join(pieces)
    start = min(start, len(text))
    scanner = Markers(markers)
    assert scanner.find(text, start) == first(text, markers, start)
    assert scanner.held(text, start) == held(text, markers, start)
    j, marker = scanner.scan(text, start)
    if marker:
        assert (j, marker) == first(text, markers, start)
    else:
        assert j == len(text) - held(text, markers, start)
        assert all(m not in text[start:j] for m in markers)


def test_the_held_piece_is_never_longer_than_a_marker_less_one() -> None:
    scanner = Markers(("<tool_call>",))
    assert scanner.held("text <tool_call") == len("<tool_call")
    assert scanner.held("text <tool_call>") == 0  # a whole marker is found, not held
    assert scanner.held("ab<to", 2) == 3
    assert scanner.held("<to", 1) == 0  # only what follows start counts
    assert Markers(("{",)).held("x{") == 0  # one-character markers are never partial
