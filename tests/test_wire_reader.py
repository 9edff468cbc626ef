"""The compiled OTLP wire reader (taskcost/normalize/_wire.pyx) against protobuf's own parse (_wire_py): for any
request, with any values, limits and fields the normaliser never reads, the normaliser's whole output (records,
rejections, messages, what the limits cut) is the same through either; and for any bytes protobuf accepts, the
compiled reader accepts them and agrees. Bytes it refuses are refused with DecodeError, never another error."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import DecodeError as PbDecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from taskcost.normalize import (
    DecodeError,
    NormalizeRules,
    _wire,  # type: ignore[attr-defined]  # compiled by the install (make install)
    _wire_py,
    normalize_wire,
)
from taskcost.normalize import _read as reading
from taskcost.normalize._limits import IntakeLimits
from tests.budget import examples
from tests.otlp_samples import sample_request

_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.time_to_first_chunk",
    "taskcost.task.id",
    "taskcost.task.kind",
    "taskcost.call.attempt",
    "taskcost.engine.name",
    "taskcost.gpu.count",
    "taskcost.image.tags",
    "service.name",
    "exception.type",
    "x",
    "",
    "é名",
]
_TEXT = st.one_of(st.sampled_from(["", "chat", "gpt-4o", "task", "vllm", "3", "é名 ✓"]), st.text(max_size=12))


def _scalar() -> st.SearchStrategy[AnyValue]:
    return st.one_of(
        _TEXT.map(lambda t: AnyValue(string_value=t)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
        st.binary(max_size=6).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),
    )


def _value() -> st.SearchStrategy[AnyValue]:
    def arrays(inner: st.SearchStrategy[AnyValue]) -> st.SearchStrategy[AnyValue]:
        def array(values: list[AnyValue]) -> AnyValue:
            v = AnyValue()
            v.array_value.values.extend(values)
            return v

        def kvlist(pairs: list[tuple[str, AnyValue]]) -> AnyValue:
            v = AnyValue()
            v.kvlist_value.values.extend(KeyValue(key=k, value=x) for k, x in pairs)
            return v

        return st.one_of(
            st.lists(inner, max_size=4).map(array),
            st.lists(st.tuples(st.sampled_from(_KEYS), inner), max_size=4).map(kvlist),
        )

    return st.recursive(_scalar(), arrays, max_leaves=6)


_ATTRS = st.lists(st.tuples(st.sampled_from(_KEYS), _value()), max_size=6)  # duplicate keys too: the last wins
_ID = st.one_of(st.binary(min_size=16, max_size=16), st.just(bytes(16)), st.binary(max_size=17))
_SPAN_ID = st.one_of(st.binary(min_size=8, max_size=8), st.just(bytes(8)), st.binary(max_size=9))
_TIME = st.one_of(st.integers(1, 2**62), st.sampled_from([0, 2**63 - 1, 2**63, 2**64 - 1]))


def _kvs(pairs: list[tuple[str, AnyValue]]) -> list[KeyValue]:
    return [KeyValue(key=k, value=v) for k, v in pairs]


@st.composite
def _requests(draw: Callable[[st.SearchStrategy[Any]], Any]) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        rs = req.resource_spans.add(schema_url=draw(_TEXT))
        rs.resource.attributes.extend(_kvs(draw(_ATTRS)))
        rs.resource.dropped_attributes_count = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name, ss.scope.version = draw(st.sampled_from(["", "vllm.engine", "openai"])), draw(_TEXT)
            ss.scope.attributes.extend(_kvs(draw(_ATTRS)))
            for _ in range(draw(st.integers(0, 3))):
                trace_id = draw(st.one_of(st.just(b"\x01" * 16), _ID))  # one trace: spans find their parents
                span = ss.spans.add(
                    trace_id=trace_id,
                    span_id=draw(_SPAN_ID),
                    parent_span_id=draw(st.one_of(st.just(b""), _SPAN_ID)),
                    trace_state=draw(_TEXT),
                    name=draw(_TEXT),
                    kind=draw(st.integers(-(2**31), 2**31 - 1)),
                    start_time_unix_nano=draw(_TIME),
                    end_time_unix_nano=draw(_TIME),
                    dropped_attributes_count=draw(st.integers(0, 2**32 - 1)),
                    dropped_events_count=draw(st.integers(0, 3)),
                    flags=draw(st.integers(0, 2**32 - 1)),
                )
                span.attributes.extend(_kvs(draw(_ATTRS)))
                for _ in range(draw(st.integers(0, 3))):
                    e = span.events.add(
                        name=draw(st.sampled_from(["exception", "gen_ai.content.completion", "first_token", "x"])),
                        time_unix_nano=draw(_TIME),
                        dropped_attributes_count=draw(st.integers(0, 2)),
                    )
                    e.attributes.extend(_kvs(draw(_ATTRS)))
                if draw(st.booleans()):
                    link = span.links.add(trace_id=draw(_ID), span_id=draw(_SPAN_ID), trace_state=draw(_TEXT))
                    link.attributes.extend(_kvs(draw(_ATTRS)))
                span.status.code = draw(st.integers(-1, 3))
                span.status.message = draw(_TEXT)
    return req


_LIMITS = st.one_of(
    st.just(IntakeLimits()),
    st.builds(
        IntakeLimits,
        attribute_count=st.integers(1, 4),
        event_attribute_count=st.integers(1, 3),
        span_event_count=st.integers(1, 2),
        attribute_value_length=st.integers(0, 6),
    ),
)


def _through(reader: Callable[..., Any], data: bytes, rules: NormalizeRules) -> str:
    """The normaliser's whole output for ``data`` read by ``reader`` (its repr: NaN compares equal to itself there),
    or the error it raised."""
    saved = reading.read_request
    reading.read_request = reader
    try:
        return repr(normalize_wire(data, rules))
    except DecodeError as exc:
        return f"DecodeError: {exc}"
    finally:
        reading.read_request = saved


def test_the_normaliser_reads_through_the_compiled_reader() -> None:
    assert reading.read_request is _wire.read_request


@settings(
    max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(req=_requests(), limits=_LIMITS)
def test_any_request_reads_the_same_through_either(req: ExportTraceServiceRequest, limits: IntakeLimits) -> None:
    data = req.SerializeToString()
    rules = NormalizeRules(limits=limits)
    compiled = _through(_wire.read_request, data, rules)
    assert not compiled.startswith("DecodeError"), compiled
    assert compiled == _through(_wire_py.read_request, data, rules)


def _mutations(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` with a byte changed, a run removed, a byte put in, a varint's continuation set, or cut short."""
    out = []
    for _ in range(12):
        b = bytearray(data)
        i = rng.randrange(len(b))
        kind = rng.randrange(5)
        if kind == 0:
            b[i] = rng.randrange(256)
        elif kind == 1:
            del b[i : i + rng.randint(1, 4)]
        elif kind == 2:
            b.insert(i, rng.choice([0x00, 0x08, 0x0A, 0x0B, 0x0C, 0x12, 0x80, 0xFF, rng.randrange(256)]))
        elif kind == 3:
            b[i] |= 0x80
        else:
            del b[i:]
        out.append(bytes(b))
    return out


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(req=_requests(), seed=st.integers(0, 2**32))
def test_damaged_bytes_protobuf_accepts_read_the_same(req: ExportTraceServiceRequest, seed: int) -> None:
    data = req.SerializeToString()
    if not data:
        return
    rules = NormalizeRules(limits=IntakeLimits(attribute_count=3, event_attribute_count=2, span_event_count=2))
    for damaged in _mutations(data, random.Random(seed)):
        compiled = _through(_wire.read_request, damaged, rules)  # raises nothing but DecodeError
        try:
            ExportTraceServiceRequest.FromString(damaged)
        except PbDecodeError:
            continue  # refused by protobuf: the compiled reader may keep what it never reads (links, trace states)
        assert compiled == _through(_wire_py.read_request, damaged, rules)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x0a\x05\x12\x03", "length past the end"),
        (b"\x0a\x80", "truncated varint"),
        (b"\x0a" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
        (b"\x00\x01", "invalid field tag"),
        (b"\x0c", "invalid wire type"),  # an end-group tag outside its group
        (b"\x0b\x08\x01", "group without its end"),
        (b"\x0a\x0a\x12\x08\x12\x06\x2a\x04\xff\xfe\xfd\xfc", "not valid UTF-8"),  # a span's name
    ],
)
def test_damaged_bytes_are_a_decode_error_saying_why(data: bytes, why: str) -> None:
    with pytest.raises(PbDecodeError):
        ExportTraceServiceRequest.FromString(data)  # protobuf refuses them too
    with pytest.raises(DecodeError, match=why):
        normalize_wire(data)


def test_what_is_never_read_is_not_checked() -> None:
    """A link's trace state that is not UTF-8 costs protobuf the whole request; here the spans are kept."""
    req = ExportTraceServiceRequest()
    span = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="s", start_time_unix_nano=1, end_time_unix_nano=2)
    )
    span.links.add(trace_id=b"\x01" * 16, span_id=b"\x03" * 8, trace_state="é")
    data = req.SerializeToString().replace("é".encode(), b"\xff\xfe")
    with pytest.raises(PbDecodeError):
        ExportTraceServiceRequest.FromString(data)
    batch = normalize_wire(data)
    assert [s.name for s in batch.spans] == ["s"] and batch.rejected_spans == 0


def test_without_the_compiled_reader_the_normaliser_reads_through_protobuf() -> None:
    """Where the install could not compile the reader (no C compiler), the same records come through protobuf."""
    data = sample_request().SerializeToString()
    code = (
        "import sys; sys.modules['taskcost.normalize._wire'] = None\n"  # its import now fails, as when not built
        "from taskcost.normalize import _read, _wire_py, normalize_wire\n"
        "assert _read.read_request is _wire_py.read_request\n"
        "print(repr(normalize_wire(sys.stdin.buffer.read())))\n"
    )
    fallback = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True).stdout
    assert fallback.decode().strip() == repr(normalize_wire(data))
