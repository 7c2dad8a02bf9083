"""How long a gateway's event loop was held: the clock its other clients live by.

:class:`LoopLag` wraps an ASGI app; from its first request on, a task on the server's own
event loop sleeps :data:`TICK` seconds at a time and keeps the worst overshoot — how long
``/health``, or any other client's stream, would have waited for the loop at that moment.
``GET /_lag`` answers it (and starts again from zero).

Run as ``python -m tests.loop_lag UPSTREAM_URL``, it serves the gateway before that
OpenAI-compatible upstream in a process of its own, set up as ``toolwire serve`` sets up its
own (its heap frozen once the app is made) (so that nothing of the test's — its
fake upstream reading a 2 MB body, its client — shares the gateway's interpreter lock), and
prints the gateway's URL.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

#: Seconds between two looks at the loop.
TICK = 0.005


class LoopLag:
    """An ASGI app (``app``) whose event loop is watched; ``worst`` is the longest the loop
    was held since it was last read (seconds)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())
        if scope["type"] == "http" and scope["path"] == "/_lag":
            body = json.dumps({"worst": self.worst}).encode()
            self.worst = 0.0
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(TICK)
            self.worst = max(self.worst, loop.time() - start - TICK)


def main() -> None:
    from toolwire.backends import OpenAIBackend
    from toolwire.backends.http import new_client
    from toolwire.server import create_app, freeze_heap
    from toolwire.testing import ServedApp

    backend = OpenAIBackend("engine", base_url=sys.argv[1], client=new_client())
    app = LoopLag(create_app(backend, model_name="gw"))
    freeze_heap()  # as toolwire serve does once its app is made
    with ServedApp(app) as served:
        print(served.url, flush=True)
        while sys.stdin.readline():  # until the test closes our standard input
            pass
        time.sleep(0)


if __name__ == "__main__":
    main()
