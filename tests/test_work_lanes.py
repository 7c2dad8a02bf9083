"""The gateway's worker: costly requests' work taken from each key's lane in turn, a bounded
queue (429 for a key with too much waiting, 503 when the worker has), and a worker that
yields the interpreter to a busy event loop (:mod:`toolwire.server.work`)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from toolwire.backends import OpenAIBackend
from toolwire.backends.http import new_client
from toolwire.budget import TURN_STEPS, YIELD_SECONDS, WorkBudget, charge, charging
from toolwire.server import create_app
from toolwire.server import work as work_module
from toolwire.server.keys import Keys
from toolwire.server.pressure import Pressure
from toolwire.server.work import (
    BUSY_SHARE,
    LANE_WAITING,
    LONGEST_PAUSE,
    QUEUE_WAITING,
    Busy,
    Lane,
    Work,
    WorkPool,
    pause_for,
)
from toolwire.testing import FakeOpenAIServer, ServedApp, text_deltas

from .work_attacks import fanout_schema


def _blocked(pool: WorkPool) -> threading.Event:
    """Hold the pool's worker on a piece of work until the event is set."""
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    pool.put("holder", hold)
    assert started.wait(10)
    return release


def test_lanes_are_served_in_turn() -> None:
    pool = WorkPool()
    release = _blocked(pool)
    done: list[str] = []
    futures = [pool.put("flood", done.append, f"flood{i}") for i in range(20)]
    futures.append(pool.put("other", done.append, "other"))
    release.set()
    for future in futures:
        future.result(10)
    # the other key's one piece comes after one of the flood's, not after twenty
    assert done.index("other") == 1
    assert done[0] == "flood0" and done[2:] == [f"flood{i}" for i in range(1, 20)]
    pool.shutdown()


def test_a_key_with_too_much_waiting_is_refused_and_others_are_not() -> None:
    pool = WorkPool()
    release = _blocked(pool)
    for _ in range(LANE_WAITING):
        pool.admit("flood")
        pool.put("flood", time.sleep, 0)
    with pytest.raises(Busy) as refused:
        pool.admit("flood")
    assert refused.value.status == 429 and refused.value.retry_after >= 1
    pool.admit("other")  # another key still gets in
    # the whole queue full: everyone is refused, with a 503
    lanes = [f"k{i}" for i in range(QUEUE_WAITING)]
    for lane in lanes[: QUEUE_WAITING - LANE_WAITING]:
        pool.put(lane, time.sleep, 0)
    with pytest.raises(Busy) as full:
        pool.admit("other")
    assert full.value.status == 503
    release.set()
    deadline = time.monotonic() + 20
    while pool.waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.waiting == 0
    pool.admit("flood")  # the queue drained: admitted again
    pool.shutdown()


def test_a_piece_that_fails_fails_its_own_request_only() -> None:
    pool = WorkPool()
    bad = pool.put("a", lambda: 1 // 0)
    good = pool.put("b", lambda: 42)
    with pytest.raises(ZeroDivisionError):
        bad.result(10)
    assert good.result(10) == 42
    pool.shutdown()


def test_the_pause_is_long_while_the_loop_is_busy_and_short_while_idle() -> None:
    # idle loop: the worker goes on at full speed
    assert pause_for(0.001, loop_ran=0.0, since=0.0011) == YIELD_SECONDS
    # a busy loop: the worker works a tenth of the time
    assert pause_for(0.001, loop_ran=0.0005, since=0.0011) == pytest.approx(
        0.001 * (1 - BUSY_SHARE) / BUSY_SHARE
    )
    # one long piece (a body decoded in C) waits no longer than the longest pause
    assert pause_for(5.0, loop_ran=1.0, since=5.0) == LONGEST_PAUSE


def test_the_worker_yields_to_a_busy_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the event loop's thread busy, charged work in the worker sleeps at its turns
    (the pool reads the loop thread's real CPU clock); with it idle, it does not. The busy
    loop hashes (C code that lets the interpreter's lock go). What is measured is the pause
    the pool chooses at each turn, not the time the worker was away (which a busy machine
    stretches, idle loop or not); and the machine is a quiet one, so that the loop alone
    decides (a loaded machine makes every pause long: :mod:`tests.test_machine_pressure`)."""
    pauses: list[float] = []
    chosen = work_module.pause_for

    def recorded(worked: float, loop_ran: float, since: float, share: float = BUSY_SHARE) -> float:
        pause = chosen(worked, loop_ran, since, share)
        pauses.append(pause)
        return pause

    monkeypatch.setattr(work_module, "pause_for", recorded)
    pool = WorkPool(machine=Pressure("/nonexistent/pressure"))

    def paused() -> float:
        budget = WorkBudget(pool=Lane(pool, "a"), pace=pool.turn)

        def work() -> None:
            with charging(budget):
                for _ in range(20):
                    started = time.thread_time()
                    while time.thread_time() - started < 0.001:
                        pass  # a millisecond of checking
                    charge(TURN_STEPS, "a step")  # one turn each

        pauses.clear()
        pool.put("a", work).result(60)
        assert len(pauses) >= 20, pauses  # a turn each step
        return sum(pauses)

    pool.watch(threading.get_ident())  # this thread plays the event loop
    idle = paused()  # this thread waits on the result: no CPU
    result: list[float] = []
    helper = threading.Thread(target=lambda: result.append(paused()))
    helper.start()
    block = b"x" * (1 << 20)
    while helper.is_alive():  # this thread busy, as a loop serving streams
        hashlib.sha256(block).digest()
    helper.join()
    busy = result[0]
    assert busy > 5 * idle, (busy, idle)
    assert busy > 20 * 0.001 * (1 - BUSY_SHARE) / BUSY_SHARE / 2, busy
    pool.shutdown()


# -- through the gateway, over real HTTP


@pytest.fixture()
def keyed() -> Iterator[tuple[str, FakeOpenAIServer]]:
    with FakeOpenAIServer() as upstream:
        for _ in range(80):
            upstream.add_stream(text_deltas("fine"))
        backend = OpenAIBackend("engine", base_url=upstream.base_url, client=new_client())
        app = create_app(backend, model_name="gw", keys=Keys.of({"flood": "kf", "other": "ko"}))
        with ServedApp(app) as served:
            yield served.url, upstream


def _costly(tools: int = 60) -> dict[str, Any]:
    return {
        "model": "gw",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": f"t{i}", "parameters": fanout_schema(i)}}
            for i in range(tools)
        ],
    }


def test_a_flooding_key_gets_429s_and_another_key_is_served(
    keyed: tuple[str, FakeOpenAIServer],
) -> None:
    url, _ = keyed
    body = _costly()

    async def main() -> tuple[list[httpx.Response], httpx.Response, list[float], float]:
        async with httpx.AsyncClient(timeout=120) as client:
            done: list[float] = []

            async def flood() -> httpx.Response:
                reply = await client.post(
                    url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer kf"}
                )
                done.append(time.monotonic())
                return reply

            floods = [asyncio.create_task(flood()) for _ in range(3 * LANE_WAITING)]
            await asyncio.sleep(0.3)
            other = await client.post(
                url + "/v1/chat/completions", json=body, headers={"authorization": "Bearer ko"}
            )
            other_done = time.monotonic()
            return list(await asyncio.gather(*floods)), other, done, other_done

    floods, other, done, other_done = asyncio.run(main())
    statuses = [r.status_code for r in floods]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(429) >= LANE_WAITING, statuses
    refused = next(r for r in floods if r.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert "retry" in refused.json()["error"]["message"]
    assert other.status_code == 200, other.text
    # the other key waited for a piece of the flood's work, not for all of it
    assert other_done < max(done)


def test_a_busy_refusal_speaks_each_api(keyed: tuple[str, FakeOpenAIServer]) -> None:
    url, _ = keyed
    work_body = _costly()
    messages_body = {
        "model": "gw",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": f"t{i}", "input_schema": fanout_schema(i)} for i in range(60)],
    }

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            chat = [
                client.post(
                    url + "/v1/chat/completions",
                    json=work_body,
                    headers={"authorization": "Bearer kf"},
                )
                for _ in range(2 * LANE_WAITING)
            ]
            messages = [
                client.post(url + "/v1/messages", json=messages_body, headers={"x-api-key": "kf"})
                for _ in range(2 * LANE_WAITING)
            ]
            return list(await asyncio.gather(*chat, *messages))

    replies = asyncio.run(main())
    refused = [r for r in replies if r.status_code == 429]
    assert refused, [r.status_code for r in replies]
    assert all(r.status_code in (200, 429) for r in replies), [r.status_code for r in replies]
    for reply in refused:
        error = reply.json()
        if reply.request.url.path.endswith("/messages"):
            assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
        else:
            assert error["error"]["type"] == "rate_limit_error"


def test_work_made_by_the_app_is_in_the_keys_lane() -> None:
    work = Work()
    budget = work.budget(1_000_000, "key:a")
    assert isinstance(budget.pool, Lane) and budget.pool.name == "key:a"
    assert not budget.inline
    work.admit(budget)  # nothing waiting: admitted
    small = work.budget(10, "key:a")
    assert small.inline
    work.pool.shutdown()
