"""A capturing stand-in for Anthropic's and OpenAI's APIs, to record what real coding agents send.

Run it as ``python tests/agents/capture.py PORT OUT_DIR``: every request (method, path with
its query, headers with the ``Authorization``/``x-api-key`` values dropped, the JSON body)
is written to ``OUT_DIR/NNN.json`` in arrival order. It answers just enough for the client
to go on: a Messages reply (streamed when asked) for ``/v1/messages``, a token count for
``count_tokens``, a streamed Responses reply for ``/responses``, an empty model list, and 200
to anything else. Its first Messages/Responses answer to a conversation carrying tools is a
call of the client's shell tool (``Bash`` for Claude Code, ``shell``/``exec_command`` for
Codex) printing a marker (with env ``CAPTURE_TOOL_SEARCH=QUERY``, first a Responses
``tool_search_call`` for QUERY, which makes Codex send its deferred MCP tools, then a call of
the first tool found; with ``CAPTURE_PATCH=1``, an ``apply_patch`` custom tool call adding
``hello.txt``), so the next request, with the tool's result, is captured too.

It is the stdlib's HTTP server on purpose: the fixtures record the clients, nothing in
between, and the script runs without the package on the path.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SECRET_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "cookie"}
MARKER = "capture-marker-ok"
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+capture-marker-ok\n*** End Patch\n"
MAX_BODY = 64 * 1024 * 1024


class Recorder:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.count = 0
        self.lock = threading.Lock()

    def save(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            path = self.out / f"{self.count:03d}.json"
        path.write_text(json.dumps(entry, indent=1, ensure_ascii=False))


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    parts = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        parts.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(parts).encode()


def _has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    for item in body.get("input") or []:
        if isinstance(item, dict) and str(item.get("type", "")).endswith("call_output"):
            return True
    return False


def _found(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools a ``tool_search_output`` in the input returned."""
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            return [t for t in item.get("tools") or [] if isinstance(t, dict)]
    return []


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or (tool.get("function") or {}).get("name") or ""))
    return names


def anthropic_reply(body: dict[str, Any]) -> tuple[str, bytes]:
    """A Messages reply: a Bash call first (if Bash is offered), then a short answer."""
    model = str(body.get("model", "m"))
    call = "Bash" in _tool_names(body) and not _has_tool_result(body)
    usage = {"input_tokens": 10, "output_tokens": 5}
    if call:
        block: dict[str, Any] = {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}}
        args = json.dumps({"command": f"echo {MARKER}", "description": "print a marker"})
        delta = {"type": "input_json_delta", "partial_json": args}
        stop, content = "tool_use", [dict(block, input=json.loads(args))]
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": "captured"}
        stop, content = "end_turn", [{"type": "text", "text": "captured"}]
    message = {
        "id": "msg_01", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage,
    }  # fmt: skip
    if not body.get("stream"):
        return "application/json", json.dumps(message).encode()
    start = dict(message, content=[], stop_reason=None)
    return "text/event-stream", _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def responses_reply(body: dict[str, Any], n: int) -> tuple[str, bytes]:
    """A streamed Responses reply: a shell call first (if one is offered), then an answer."""
    names = _tool_names(body)
    shell = next((n for n in ("shell", "exec_command", "shell_command") if n in names), None)
    rid = f"resp_{n}"
    search = os.environ.get("CAPTURE_TOOL_SEARCH")
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    searched = any(i.get("type") == "tool_search_output" for i in items)
    kinds = [t.get("type") for t in body.get("tools") or [] if isinstance(t, dict)]
    if search and "tool_search" in kinds and not searched:
        item: dict[str, Any] = {
            "type": "tool_search_call", "id": "ts_1", "call_id": "ts_1", "execution": "client",
            "arguments": {"query": search}, "status": "completed",
        }  # fmt: skip
    elif search and searched and _found(body) and not _has_tool_result(body):
        # the first tool the search returned, called with its namespace
        found = _found(body)[0]
        inner = found.get("tools", [found])[0]
        item = {
            "type": "function_call", "id": "fc_2", "call_id": "call_2", "name": inner["name"],
            "namespace": found.get("name"), "arguments": json.dumps({"a": 2, "b": 3}),
            "status": "completed",
        }  # fmt: skip
    elif os.environ.get("CAPTURE_PATCH") and "apply_patch" in names and not _has_tool_result(body):
        item = {
            "type": "custom_tool_call", "id": "ctc_1", "call_id": "call_p", "name": "apply_patch",
            "input": PATCH, "status": "completed",
        }  # fmt: skip
    elif shell and not _has_tool_result(body):
        args: dict[str, Any]
        if shell == "shell":
            args = {"command": ["bash", "-lc", f"echo {MARKER}"]}
        elif shell == "exec_command":
            args = {"cmd": f"echo {MARKER}"}
        else:
            args = {"command": f"echo {MARKER}"}
        item = {
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": shell,
            "arguments": json.dumps(args), "status": "completed",
        }  # fmt: skip
    else:
        item = {
            "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "captured", "annotations": []}],
        }  # fmt: skip
    usage = {
        "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15,
    }  # fmt: skip
    response: dict[str, Any] = {
        "id": rid,
        "object": "response",
        "status": "in_progress",
        "model": body.get("model"),
        "output": [],
    }
    done = dict(response, status="completed", output=[item], usage=usage)
    return "text/event-stream", _sse(
        [
            ("response.created", {"type": "response.created", "response": response}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]
    )


def make_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _record(self) -> dict[str, Any] | None:
            length = min(int(self.headers.get("content-length") or 0), MAX_BODY)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"_raw": raw[:2000].decode("utf-8", "replace")}
            headers = {
                k.lower(): ("<dropped>" if k.lower() in SECRET_HEADERS else v)
                for k, v in self.headers.items()
            }
            recorder.save(
                {"method": self.command, "path": self.path, "headers": headers, "body": body}
            )
            return body if isinstance(body, dict) else None

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_HEAD(self) -> None:
            self._record()
            self._send(200, "text/plain", b"")

        def do_GET(self) -> None:
            self._record()
            if self.path.split("?")[0].endswith("/models"):
                self._send(
                    200,
                    "application/json",
                    json.dumps({"object": "list", "data": [], "models": []}).encode(),
                )
            else:
                self._send(200, "application/json", b"{}")

        def do_POST(self) -> None:
            body = self._record() or {}
            path = self.path.split("?")[0]
            if path.endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
            elif path.endswith("/messages"):
                self._send(200, *anthropic_reply(body))
            elif path.endswith("/responses"):
                self._send(200, *responses_reply(body, recorder.count))
            else:
                self._send(200, "application/json", b"{}")

    return Handler


def main() -> None:
    port, out = int(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(Recorder(out)))
    print(f"capturing on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
