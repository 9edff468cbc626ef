"""A local OpenAI- and Anthropic-compatible HTTP server: the only fake in the interop tests.

It stands in for the paid API at the HTTP boundary, so the real `openai` and `anthropic` client libraries (and the
instrumentations wrapped around them) run unchanged. Every answer reports fixed token usage, prompt-cache hits
included, and a fresh response id; Anthropic answers report ``input_tokens`` *exclusive* of cache, as the real API
does. Run it in a thread (``FakeLLM().start()``) or as a script (``python -m tests.interop.fake_llm PORT``).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_MODEL = "gpt-4o-2024-08-06"
ANTHROPIC_MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True)
class OpenAIUsage:
    prompt_tokens: int = 1_200  # inclusive of cached_tokens, as OpenAI reports it
    cached_tokens: int = 1_000
    completion_tokens: int = 300
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class AnthropicUsage:
    input_tokens: int = 200  # EXCLUSIVE of the cache fields, as Anthropic reports it
    cache_read_input_tokens: int = 1_800
    cache_creation_input_tokens: int = 500
    output_tokens: int = 120

    @property
    def inclusive_input(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    response_id: str


@dataclass
class FakeLLM:
    openai_usage: OpenAIUsage = field(default_factory=OpenAIUsage)
    anthropic_usage: AnthropicUsage = field(default_factory=AnthropicUsage)
    host: str = "127.0.0.1"
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeLLM:
        fake = self

        class Handler(_Handler):
            llm = fake

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    # -- bodies --------------------------------------------------------------------------------------
    def openai_usage_json(self) -> dict[str, Any]:
        u = self.openai_usage
        return {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens, "audio_tokens": 0},
        }

    def anthropic_usage_json(self, output_tokens: int | None = None) -> dict[str, Any]:
        u = self.anthropic_usage
        return {
            "input_tokens": u.input_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens,
            "cache_creation_input_tokens": u.cache_creation_input_tokens,
            "output_tokens": u.output_tokens if output_tokens is None else output_tokens,
        }


TEXT = "The diff looks fine."


class _Handler(BaseHTTPRequestHandler):
    llm: FakeLLM
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/chat/completions"):
            rid = self.llm.next_id("chatcmpl-fake")
            self._remember(path, body, rid)
            if body.get("stream"):
                self._openai_stream(rid, body)
            else:
                self._json(200, self._openai_completion(rid))
        elif path.endswith("/messages"):
            rid = self.llm.next_id("msg_fake")
            self._remember(path, body, rid)
            if body.get("stream"):
                self._anthropic_stream(rid)
            else:
                self._json(200, self._anthropic_message(rid))
        else:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def _remember(self, path: str, body: dict[str, Any], rid: str) -> None:
        with self.llm._lock:
            self.llm.seen.append(Seen(path, {k.lower(): v for k, v in self.headers.items()}, body, rid))

    def _json(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, data: dict[str, Any] | str, event: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
        self.wfile.write(frame.encode())
        self.wfile.flush()

    # -- OpenAI --------------------------------------------------------------------------------------
    def _openai_completion(self, rid: str) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "chat.completion",
            "created": 1_796_000_000,
            "model": OPENAI_MODEL,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": TEXT, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": self.llm.openai_usage_json(),
        }

    def _openai_stream(self, rid: str, body: dict[str, Any]) -> None:
        self._sse_start()
        base = {"id": rid, "object": "chat.completion.chunk", "created": 1_796_000_000, "model": OPENAI_MODEL}
        self._sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        for word in TEXT.split(" "):
            self._sse({**base, "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]})
        self._sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse({**base, "choices": [], "usage": self.llm.openai_usage_json()})
        self._sse("[DONE]")

    # -- Anthropic -----------------------------------------------------------------------------------
    def _anthropic_message(self, rid: str) -> dict[str, Any]:
        return {
            "id": rid,
            "type": "message",
            "role": "assistant",
            "model": ANTHROPIC_MODEL,
            "content": [{"type": "text", "text": TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": self.llm.anthropic_usage_json(),
        }

    def _anthropic_stream(self, rid: str) -> None:
        self._sse_start()
        start = {**self._anthropic_message(rid), "content": [], "stop_reason": None}
        start["usage"] = self.llm.anthropic_usage_json(output_tokens=1)
        self._sse({"type": "message_start", "message": start}, "message_start")
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        self._sse(block, "content_block_start")
        for word in TEXT.split(" "):
            delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word + " "}}
            self._sse(delta, "content_block_delta")
        self._sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        usage = self.llm.anthropic_usage_json()
        self._sse(
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": usage},
            "message_delta",
        )
        self._sse({"type": "message_stop"}, "message_stop")


if __name__ == "__main__":
    server = FakeLLM(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(server.url, flush=True)
    threading.Event().wait()
