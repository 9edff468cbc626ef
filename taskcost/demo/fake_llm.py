"""FakeLLM: OpenAI chat completions / responses and Anthropic messages over real HTTP on 127.0.0.1.

The one fake model server of this project: the tests drive the real ``openai`` and ``anthropic`` clients against it,
and ``taskcost demo`` runs its simulated fleet against it. It stands in for a provider at the HTTP boundary, so the
client libraries (and any instrumentation wrapped around them) run unchanged.

Each request takes the next scripted step (``Reply``, ``Fault``, ``Stall``, ``Drop``); when the script is empty,
the ``responder`` chooses the step from the request (default: a plain ``Reply()``). Usage is sent verbatim in the
provider's wire format: what the caller writes is exactly what the provider would send (Anthropic's
``input_tokens`` exclusive of cache, OpenAI's ``prompt_tokens`` inclusive of ``cached_tokens``). Every request is
recorded (headers and JSON body) unless ``record=False``. Routes are matched on the path's end, so one server can
stand for several endpoints under different path prefixes (``/vllm/v1/chat/completions``). A GET is answered by
``pages`` (a path -> content type and body, or None: 404), e.g. an engine's ``/metrics``; a ``Reply`` may carry
``on_done``, told when its answer was sent (or cut short), e.g. to record what an engine would after a request.

    with FakeLLM() as llm:
        llm.script(Fault(429, retry_after_ms=5), Reply(usage={...}))
        client = openai.OpenAI(base_url=llm.openai_url, api_key="k")

As a script, ``python -m taskcost.demo.fake_llm [PORT]`` serves plain replies until killed and prints its URL.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Drop", "Fault", "FakeLLM", "Pages", "Received", "Reply", "Responder", "Stall", "Step", "api_of"]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up, or a connection we dropped on purpose


CREATED = 1_735_689_600


@dataclass(frozen=True)
class Reply:
    """A successful answer. ``usage`` is the provider's own usage object, sent as given (None: a default)."""

    text: str = "Hello there, agent."
    model: str | None = None  # default: the requested model
    usage: Mapping[str, Any] | None = None
    finish_reason: str | None = None  # default: "stop" (OpenAI chat), "end_turn" (Anthropic)
    first_token_delay: float = 0.0  # seconds before the first content event of a stream (or the body)
    chunk_delay: float = 0.0  # seconds between further stream events (a body waits for all of them too)
    chunks: int = 3  # content pieces of a streamed answer
    response_id: str | None = None
    cut_after: int | None = None  # drop the connection after this many stream events (a broken stream)
    # called once the answer is written: (epoch seconds just before its last part was written, after every delay;
    # whether it was sent whole at its own pace: False when the connection broke or was cut, or when hurry() skipped
    # its delays)
    on_done: Callable[[float, bool], None] | None = None


@dataclass(frozen=True)
class Fault:
    """An error answer (429, 500, 503, 400, ...) with the provider's error body."""

    status: int
    retry_after_ms: int | None = 5  # small, so the clients' own retries happen within milliseconds
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the error answer


@dataclass(frozen=True)
class Stall:
    """Wait this long before answering with a default Reply (to trip client timeouts)."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering (a connection error for the client)."""


Step = Reply | Fault | Stall | Drop


def api_of(path: str) -> str | None:
    """Which API a request path is for: ``chat`` (OpenAI chat completions), ``responses`` or ``messages``."""
    path = path.split("?")[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    return None


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float

    @property
    def api(self) -> str | None:
        return api_of(self.path)

    @property
    def model(self) -> str | None:
        model = self.body.get("model") if isinstance(self.body, dict) else None
        return str(model) if model is not None else None


Responder = Callable[[Received], Step]
"""Chooses the answer to a request when no scripted step is queued (called on the request's own thread)."""

Pages = Callable[[str], tuple[str, bytes] | None]
"""Answers a GET: the path -> (content type, body), or None (404)."""


class FakeLLM:
    """The server. Use as a context manager (or ``start()`` / ``close()``); ``openai_url`` and ``anthropic_url``
    are the clients' base URLs."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
        record: bool = True,
        pages: Pages | None = None,
    ) -> None:
        self._script: deque[Step] = deque()
        self._lock = threading.Lock()
        self.received: list[Received] = []
        self.responder = responder
        self.record = record
        self.pages = pages
        self.hook_errors: list[str] = []  # what a page or an on_done hook raised (the client got its answer anyway)
        self._server = _QuietServer((host, port), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), name="fake-llm", daemon=True)
        self._started = self._closed = False
        self._counter = 0
        self._hurry = threading.Event()

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def start(self) -> FakeLLM:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()
        return self

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving (requests in flight finish on their own threads); safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        if started:
            self._server.shutdown()
        self._server.server_close()

    stop = close

    def hurry(self) -> None:
        """From now on answer at once: requests in flight skip the rest of their delays (a fast shutdown)."""
        self._hurry.set()

    def pause(self, seconds: float) -> None:
        """A scripted delay (cut short by ``hurry()``)."""
        self._hurry.wait(seconds)

    def script(self, *steps: Step) -> None:
        """Queue steps; each request consumes one."""
        with self._lock:
            self._script.extend(steps)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.received.clear()

    def requests(self, path_suffix: str = "") -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path.split("?")[0].endswith(path_suffix)]

    @property
    def served(self) -> int:
        """Requests answered (or refused) so far, recorded or not."""
        return self._counter

    # -- used by the handler --------------------------------------------------------------------

    def _next(self, received: Received) -> tuple[Step, int]:
        with self._lock:
            if self.record:
                self.received.append(received)
            self._counter += 1
            scripted = self._script.popleft() if self._script else None
            n = self._counter
        if scripted is not None:
            return scripted, n
        return (self.responder(received) if self.responder is not None else Reply()), n


def _handler_for(llm: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_llm = llm

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_llm: FakeLLM

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed-ACK stalls

    def do_GET(self) -> None:
        pages = self.server_llm.pages
        try:
            page = pages(self.path) if pages is not None else None
        except Exception as exc:  # a page bug: a 500 the scraper sees, never a hung connection
            self.server_llm.hook_errors.append(f"GET {self.path}: {exc!r}")
            self._json(500, {"error": {"message": f"fake page failed: {exc!r}", "type": "api_error"}})
            return
        if page is None:
            self._json(404, {"error": {"message": f"no page {self.path}", "type": "not_found"}})
            return
        content_type, data = page
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        received = Received("POST", self.path, headers, body, time.time())
        api = received.api
        if api is None:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            step, n = self.server_llm._next(received)
        except Exception as exc:  # a responder bug: answer as a provider would, never hang the client
            self._json(500, {"error": {"message": f"fake LLM responder failed: {exc!r}", "type": "api_error"}})
            return
        if isinstance(step, Drop):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(step, Stall):
            self.server_llm.pause(step.seconds)
            step = Reply()
        if isinstance(step, Fault):
            if step.delay:
                self.server_llm.pause(step.delay)
            self._fault(api, step)
            return
        request = body if isinstance(body, dict) else {}
        model = step.model or str(request.get("model", "model"))
        rid = step.response_id or f"{'msg' if api == 'messages' else 'resp' if api == 'responses' else 'chatcmpl'}_{n}"
        if request.get("stream"):
            last = self._sse(_EVENTS[api](step, request, model, rid), step)
        else:
            wait = step.first_token_delay + step.chunk_delay * max(0, len(_pieces(step.text, step.chunks)) - 1)
            if wait > 0:
                self.server_llm.pause(wait)
            last = time.time()
            try:
                self._json(200, _BODIES[api](step, request, model, rid))
            except (BrokenPipeError, ConnectionResetError):  # the client hung up
                self.close_connection = True
                last = None
        if step.on_done is not None:
            whole = last is not None and not self.server_llm._hurry.is_set()
            try:
                step.on_done(time.time() if last is None else last, whole)
            except Exception as exc:  # the answer is out: keep the error for the owner to report
                self.server_llm.hook_errors.append(f"on_done of {self.path}: {exc!r}")

    # -- writing ----------------------------------------------------------------------------------

    def _json(self, status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _fault(self, api: str, fault: Fault) -> None:
        kind = {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error", 400: "invalid_request_error"}
        error_type = kind.get(fault.status, "api_error")
        if api == "messages":
            payload: Any = {"type": "error", "error": {"type": error_type, "message": f"fake {fault.status}"}}
        else:
            payload = {"error": {"message": f"fake {fault.status}", "type": error_type, "code": None, "param": None}}
        headers = dict(fault.headers)
        if fault.retry_after_ms is not None:
            headers["retry-after-ms"] = str(fault.retry_after_ms)
        self._json(fault.status, payload, headers)

    def _sse(self, events: Iterator[tuple[str | None, Any, float]], step: Reply) -> float | None:
        """Streams the events; returns when the last one was about to be written (epoch seconds), or None when the
        stream was cut (``cut_after``) or the client hung up."""
        last = time.time()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for index, (event, data, delay) in enumerate(events):
                if step.cut_after is not None and index >= step.cut_after:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                if delay:
                    self.server_llm.pause(delay)
                last = time.time()
                text = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
                chunk = frame.encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return None
        return last


def _pieces(text: str, n: int) -> list[str]:
    n = max(1, min(n, len(text) or 1))
    size = -(-len(text) // n) if text else 1
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# -- OpenAI chat completions ------------------------------------------------------------------------

_CHAT_USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 10,
    "total_tokens": 110,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}


def _chat_body(step: Reply, request: dict[str, Any], model: str, rid: str) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": step.text, "refusal": None},
                "finish_reason": step.finish_reason or "stop",
                "logprobs": None,
            }
        ],
        "usage": dict(step.usage) if step.usage is not None else _CHAT_USAGE,
    }


def _chat_events(step: Reply, request: dict[str, Any], model: str, rid: str) -> Iterator[tuple[str | None, Any, float]]:
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    base: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": CREATED, "model": model}
    if include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield None, chunk({"role": "assistant", "content": ""}), step.first_token_delay
    for piece in _pieces(step.text, step.chunks):
        yield None, chunk({"content": piece}), step.chunk_delay
    yield None, chunk({}, step.finish_reason or "stop"), 0.0
    if include_usage:
        usage = dict(step.usage) if step.usage is not None else _CHAT_USAGE
        yield None, {**base, "choices": [], "usage": usage}, 0.0
    yield None, "[DONE]", 0.0


# -- OpenAI responses -------------------------------------------------------------------------------

_RESPONSES_USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 10,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 110,
}


def _response_object(step: Reply, model: str, rid: str, status: str, usage: Any) -> dict[str, Any]:
    output = []
    if status == "completed":
        output = [
            {
                "type": "message",
                "id": f"msg_{rid}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        ]
    return {
        "id": rid,
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "temperature": 1.0,
        "top_p": 1.0,
    }


def _responses_body(step: Reply, request: dict[str, Any], model: str, rid: str) -> dict[str, Any]:
    usage = dict(step.usage) if step.usage is not None else _RESPONSES_USAGE
    return _response_object(step, model, rid, "completed", usage)


def _responses_events(
    step: Reply, request: dict[str, Any], model: str, rid: str
) -> Iterator[tuple[str | None, Any, float]]:
    seq = iter(range(1_000_000))
    created = _response_object(step, model, rid, "in_progress", None)
    yield "response.created", {"type": "response.created", "sequence_number": next(seq), "response": created}, 0.0
    delay = step.first_token_delay
    for piece in _pieces(step.text, step.chunks):
        delta = {
            "type": "response.output_text.delta",
            "sequence_number": next(seq),
            "item_id": f"msg_{rid}",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
            "logprobs": [],
        }
        yield "response.output_text.delta", delta, delay
        delay = step.chunk_delay
    usage = dict(step.usage) if step.usage is not None else _RESPONSES_USAGE
    done = _response_object(step, model, rid, "completed", usage)
    yield "response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": done}, 0.0


# -- Anthropic messages -----------------------------------------------------------------------------

_MESSAGES_USAGE = {
    "input_tokens": 100,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 10,
}


def _message(step: Reply, model: str, rid: str, content: list[Any], usage: Any, stop: str | None) -> dict[str, Any]:
    return {
        "id": rid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def _messages_body(step: Reply, request: dict[str, Any], model: str, rid: str) -> dict[str, Any]:
    usage = dict(step.usage) if step.usage is not None else _MESSAGES_USAGE
    content = [{"type": "text", "text": step.text}]
    return _message(step, model, rid, content, usage, step.finish_reason or "end_turn")


def _messages_events(
    step: Reply, request: dict[str, Any], model: str, rid: str
) -> Iterator[tuple[str | None, Any, float]]:
    usage = dict(step.usage) if step.usage is not None else dict(_MESSAGES_USAGE)
    output_tokens = usage.get("output_tokens", 0)
    start_usage = {**usage, "output_tokens": 1}  # like the API: a placeholder until message_delta
    start = {"type": "message_start", "message": _message(step, model, rid, [], start_usage, None)}
    yield "message_start", start, 0.0
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    yield "content_block_start", block, 0.0
    yield "ping", {"type": "ping"}, 0.0
    delay = step.first_token_delay
    for piece in _pieces(step.text, step.chunks):
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}
        yield "content_block_delta", delta, delay
        delay = step.chunk_delay
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}, 0.0
    final = {
        "type": "message_delta",
        "delta": {"stop_reason": step.finish_reason or "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }
    yield "message_delta", final, 0.0
    yield "message_stop", {"type": "message_stop"}, 0.0


_BODIES = {"chat": _chat_body, "responses": _responses_body, "messages": _messages_body}
_EVENTS = {"chat": _chat_events, "responses": _responses_events, "messages": _messages_events}


def main(argv: list[str] | None = None) -> None:
    """``python -m taskcost.demo.fake_llm [PORT]``: serve plain replies on 127.0.0.1 until killed."""
    args = sys.argv[1:] if argv is None else argv
    llm = FakeLLM(port=int(args[0]) if args else 0, record=False).start()
    print(llm.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
