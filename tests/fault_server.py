"""A fault-injecting OpenAI-style chat server on loopback, for tests of judge/generator clients.

`FaultServer(replies, faults)` answers POST /v1/chat/completions. The reply is chosen by the
first key of `replies` that occurs in the last user message; `faults` maps such a key to the
faults of its successive requests (one per request; when the list is used up, the reply is
sent normally). A fault is one of:
    "500"        HTTP 500 with a JSON error body
    "429:S"      HTTP 429 with `Retry-After: S`
    "slow:S"     sleep S seconds, then send the reply (longer than the client's timeout)
    "malformed"  HTTP 200, content-type application/json, body that is not JSON
Every request is recorded (time, question key, Authorization header, body) in `requests`.
GET /v1/models lists `model`; GET /health answers ok.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Recorded:
    time: float
    key: str | None
    authorization: str | None
    body: dict[str, Any]


class FaultServer:
    def __init__(
        self,
        replies: dict[str, str],
        faults: dict[str, list[str]] | None = None,
        model: str = "fault-judge",
    ):
        self.replies = replies
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.model = model
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def __enter__(self) -> FaultServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": server.model, "object": "model", "created": 0}],
                        },
                    )
                elif self.path == "/health":
                    self._json(200, {"status": "ok"})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._json(404, {"error": {"message": "not found"}})
                    return
                server._handle(self, body)

            def _json(self, code: int, obj: Any, headers: dict[str, str] | None = None):
                data = json.dumps(obj).encode()
                self._raw(code, data, headers)

            def _raw(self, code: int, data: bytes, headers: dict[str, str] | None = None):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): expected for "slow"

        class Server(ThreadingHTTPServer):
            # the default listen backlog of 5 drops connections when 8 clients and their
            # retries arrive at once; a dropped SYN would look like a fault we did not inject
            request_queue_size = 128

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def count(self, key: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if key is None or r.key == key)

    def count_at_least(self, n: int, key: str | None = None, wait: float = 10.0) -> int:
        """The count once it reaches `n`, or after `wait` seconds. A client that gave up on a
        timeout may have sent its last request before this server's handler thread recorded it;
        the request is still in the socket buffer and is recorded shortly after."""
        deadline = time.monotonic() + wait
        while self.count(key) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.count(key)

    def times(self, key: str) -> list[float]:
        with self._lock:
            return [r.time for r in self.requests if r.key == key]

    # ---- one request

    def _handle(self, handler, body: dict[str, Any]) -> None:
        user = next(
            (
                m.get("content", "")
                for m in reversed(body.get("messages", []))
                if m.get("role") == "user"
            ),
            "",
        )
        key = next((k for k in self.replies if k in user), None)
        with self._lock:
            self.requests.append(
                Recorded(time.monotonic(), key, handler.headers.get("Authorization"), body)
            )
            queue = self.faults.get(key) if key is not None else None
            fault = queue.pop(0) if queue else None
        if key is None:
            handler._json(400, {"error": {"message": "unknown question"}})
            return
        if fault == "500":
            handler._json(500, {"error": {"message": "injected server error"}})
            return
        if fault is not None and fault.startswith("429:"):
            handler._json(
                429, {"error": {"message": "rate limited"}}, {"Retry-After": fault.split(":", 1)[1]}
            )
            return
        if fault == "malformed":
            handler._raw(200, b'{"id": "x", "choices": [ this is not json')
            return
        if fault is not None and fault.startswith("slow:"):
            time.sleep(float(fault.split(":", 1)[1]))
        elif fault is not None:
            raise ValueError(f"unknown fault {fault!r}")
        handler._json(
            200,
            {
                "id": "chatcmpl-fault",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", self.model),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": self.replies[key]},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )
