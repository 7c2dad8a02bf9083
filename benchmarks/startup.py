"""How fast the command line starts: each command run in a fresh process, against Python's
own start-up.

Measured in one run, interleaved so that a machine's load falls on every command alike, the
median of ``--runs`` (default 15) wall-clock times of:

- ``python -c "import json"``: the floor, Python starting and importing one module;
- ``toolwire --help``;
- ``toolwire parse --help``, ``detect --help``, ``args --help``, ``chat --help``;
- ``toolwire parse --format hermes`` reading a small reply with one call on stdin.

Each toolwire command is run as ``python -m toolwire`` (the same interpreter, no console
script shim in the way). Printed: the median and the fastest run in milliseconds, and each
median's ratio to the floor's. Targets: ``toolwire --help`` within 10x of
``python -c "import json"``, each command's ``--help`` within 3x (the families load on first
use, not to print help), ``parse`` reading one call within 3x too (it loads what the one
family's reader needs: the schema checker, Jinja, the other readers' streams wait for a
command that uses them), and neither ``--help`` nor ``parse`` loading the gateway, the
engine or the HTTP client (a test checks that; here it is only timed). Figures, never
assertions: these machines are shared.

    python benchmarks/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

REPLY = b'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'

#: What is timed: a name, the command, what it reads on stdin.
COMMANDS: list[tuple[str, list[str], bytes]] = [
    ('python -c "import json"', [sys.executable, "-c", "import json"], b""),
    ("toolwire --help", [sys.executable, "-m", "toolwire", "--help"], b""),
    ("toolwire parse --help", [sys.executable, "-m", "toolwire", "parse", "--help"], b""),
    ("toolwire detect --help", [sys.executable, "-m", "toolwire", "detect", "--help"], b""),
    ("toolwire args --help", [sys.executable, "-m", "toolwire", "args", "--help"], b""),
    ("toolwire chat --help", [sys.executable, "-m", "toolwire", "chat", "--help"], b""),
    (
        "toolwire parse (one call)",
        [sys.executable, "-m", "toolwire", "parse", "--format", "hermes"],
        REPLY,
    ),
]


def _once(command: list[str], stdin: bytes) -> float:
    start = time.perf_counter()
    subprocess.run(command, input=stdin, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command")
    runs = parser.parse_args().runs
    for _, command, stdin in COMMANDS:  # warm the file cache and the bytecode first
        _once(command, stdin)
    times: list[list[float]] = [[] for _ in COMMANDS]
    for _ in range(runs):
        for i, (_, command, stdin) in enumerate(COMMANDS):
            times[i].append(_once(command, stdin))
    floor = statistics.median(times[0])
    print(f"start-up, median of {runs} runs each (fastest in brackets), ratio to the floor")
    for (name, _, _), measured in zip(COMMANDS, times, strict=True):
        median = statistics.median(measured)
        print(
            f"  {name:28} {median * 1000:7.1f} ms  ({min(measured) * 1000:6.1f})"
            f"  {median / floor:5.1f}x"
        )
    for (name, _, _), measured in zip(COMMANDS[1:], times[1:], strict=True):
        target = 10 if name == "toolwire --help" else 3
        ratio = statistics.median(measured) / floor
        verdict = "within" if ratio <= target else "over"
        print(f"{name}: {ratio:.1f}x python -c 'import json' ({verdict} the {target}x target)")


if __name__ == "__main__":
    main()
