"""``toolwire serve`` told to stop (SIGTERM) while a stream is in flight: the stream ends
whole and the process exits 0; a stream that outlasts ``--shutdown-timeout`` is ended at
that bound, and the process exits then.

A real gateway process before a real upstream over HTTP whose reply takes seconds, a
request streamed by the official ``openai`` client while the signal is sent.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from .gateway_process import Gateway, gateway, slow_upstream

WORDS = [f"w{i} " for i in range(8)]


class Streamed:
    """A chat completion streamed in a thread by the official client: its chunks as they
    come, an event at the first, and the error that ended it, if one did."""

    def __init__(self, root: str) -> None:
        self.chunks: list[Any] = []
        self.error: BaseException | None = None
        self.first = threading.Event()
        self._client = openai.OpenAI(base_url=root + "/v1", api_key="x", max_retries=0, timeout=60)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            stream = self._client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Count."}], stream=True
            )
            for chunk in stream:
                self.chunks.append(chunk)
                if any(c.delta.content for c in chunk.choices):
                    self.first.set()
        except BaseException as exc:  # the test reads it
            self.error = exc
        finally:
            self.first.set()

    def join(self, seconds: float) -> None:
        self._thread.join(seconds)
        assert not self._thread.is_alive(), "the stream did not end"

    def text(self) -> str:
        return "".join(c.delta.content or "" for k in self.chunks for c in k.choices)

    def finish(self) -> str | None:
        reasons = [c.finish_reason for k in self.chunks for c in k.choices if c.finish_reason]
        return reasons[-1] if reasons else None


def _stop_mid_stream(served: Gateway) -> tuple[Streamed, float]:
    """A stream started and its first words in; then SIGTERM. The stream, and when."""
    streamed = Streamed(served.root)
    assert streamed.first.wait(30), served.stderr()
    assert streamed.error is None, streamed.error
    served.stop()
    return streamed, time.monotonic()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_stream_in_flight_ends_whole_and_the_process_exits_0(
    tmp_path: Path, workers: str
) -> None:
    # 8 words, 0.4 s apart: the stream has about 3 s to go when the signal comes
    with slow_upstream(WORDS, 0.4) as (_, base):
        args = ("--upstream", base, "--upstream-model", "m", "--workers", workers)
        with gateway(tmp_path, *args, "--shutdown-timeout", "20") as served:
            streamed, stopped = _stop_mid_stream(served)
            if workers == "1":  # one process: the listening socket is closed at once
                time.sleep(0.5)
                with pytest.raises(httpx.ConnectError):
                    httpx.get(served.root + "/health", timeout=2)
            streamed.join(30)
            code = served.proc.wait(30)
            took = time.monotonic() - stopped
    assert streamed.error is None, (streamed.error, served.stderr())
    assert streamed.text() == "".join(WORDS)
    assert streamed.finish() == "stop"
    assert code == 0, served.stderr()
    assert took < 20, took  # it waited for the stream, not for the bound
    assert "Traceback" not in served.stderr()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_stream_that_outlasts_the_bound_is_ended_at_it(tmp_path: Path, workers: str) -> None:
    # 8 words, 3 s apart: the stream would take 24 s; the bound is 1 s
    with slow_upstream(WORDS, 3.0) as (_, base):
        args = ("--upstream", base, "--upstream-model", "m", "--workers", workers)
        with gateway(tmp_path, *args, "--shutdown-timeout", "1") as served:
            streamed, stopped = _stop_mid_stream(served)
            code = served.proc.wait(15)
            took = time.monotonic() - stopped
            streamed.join(10)
    assert took < 8, took  # the bound and a little start-up slack, not the stream's 24 s
    assert code == 0, served.stderr()
    assert streamed.text() != "".join(WORDS)  # it was ended, not finished
