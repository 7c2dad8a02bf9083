"""Waiting for a ``toolwire serve`` started in a subprocess, for the tests that start one."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_healthy(proc: subprocess.Popen[bytes], root: str, log: Path, limit: float = 60) -> None:
    """Return once ``root``'s ``/health`` answers 200; fail with the server's log if the
    process ends first, or after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while True:
        try:
            if httpx.get(root + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.2)
