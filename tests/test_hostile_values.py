"""One odd value costs at most its own span, never its batch: every attribute the normaliser reads, sent with
hostile values (wrong types, NaN, infinities, huge and tiny magnitudes, long strings, empty), and hostile span
fields (end before start, zero or short ids, times out of range), beside good spans -- over OTLP/HTTP (protobuf and
JSON; decoded in the serving process and in a decode worker) and OTLP/gRPC, through the real receivers into a
real DuckDB file. Every request is a success, every good span is stored, and a span that cannot be stored is
rejected alone, through partial success. Several odd spans share one task (their sums are kept too), and the
pricing attributes are configured to read counts as well as names. The budget is fixed and derandomized: a failure
prints its example and a ``@reproduce_failure`` blob, and replays the same way."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from taskcost.app import create_app
from taskcost.normalize import _conventions as C
from taskcost.normalize import _names as N
from taskcost.pricing import DEFAULT_PRICING_ATTRIBUTES
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.interop.collectors import Collector, grpc_collector
from tests.otlp_samples import sample_request, to_otlp_json

EXAMPLES = int(os.environ.get("TASKCOST_HOSTILE_EXAMPLES", "20"))
BUDGET = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
PB = {"Content-Type": "application/x-protobuf"}
T0 = 1_764_000_000_000_000_000

# pricing attributes as a deployment may configure them: a count (1h cache writes) besides the variant names
PRICING = {**DEFAULT_PRICING_ATTRIBUTES, "x.cache_write_1h": "cache_write_1h_tokens", "x.batch": "processing"}
# every attribute name the normaliser reads: the conventions' table, taskcost's own names, and the resource's
NAMES = sorted(
    set(C.READ_NAMES)
    | set(PRICING)
    | {v for k, v in vars(N).items() if k.isupper() and isinstance(v, str) and "." in v}
)
HOSTILE_TEXT = [
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "-0",
    "0",
    "1e26",
    "1E-13",
    "0.30000000000000004",
    "9" * 26,  # below 10^26: fits DECIMAL(38, 12) alone, but not two of them added up in one task
    "9.5e25",
    "999999999999999.9999999999995",
    "1e999999",
    "9" * 400,
    "",
    " ",
    "\x00",
    "\u2603" * 10,
    "1,000",
    "0x10",
    "1_000",
    "true",
    "completed",
    "self_hosted",
    "chat",
    "execute_tool",
    "x" * 20_000,
]
numeric_text = st.one_of(
    st.sampled_from(HOSTILE_TEXT[:16]),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.floats().map(repr),
    st.integers(-(10**40), 10**40).map(str),
)
scalars = st.one_of(
    st.builds(lambda s: AnyValue(string_value=s), numeric_text),
    st.builds(lambda s: AnyValue(string_value=s), numeric_text),
    st.builds(lambda s: AnyValue(string_value=s), st.sampled_from(HOSTILE_TEXT) | st.text(max_size=30)),
    st.builds(
        lambda i: AnyValue(int_value=i),
        st.sampled_from([-(2**63), 2**63 - 1, -1, 0, 10**12, 10**12 + 1, 2**31, 2**53 + 1])
        | st.integers(-(2**63), 2**63 - 1),
    ),
    st.builds(
        lambda f: AnyValue(double_value=f),
        st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, 5e-324, -0.0, 0.1 * 3]) | st.floats(),
    ),
    st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
    st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=20)),
    st.just(AnyValue()),
)
any_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: AnyValue(array_value={"values": vs})),
        st.lists(st.tuples(st.sampled_from(NAMES), inner), max_size=3).map(
            lambda kvs: AnyValue(kvlist_value={"values": [KeyValue(key=k, value=v) for k, v in kvs]})
        ),
    ),
    max_leaves=4,
)
# every name the normaliser reads, each with a hostile value (a few absent, as the conventions' fallbacks need)
attributes = st.fixed_dictionaries({}, optional=dict.fromkeys(NAMES, any_values))
# what makes the odd span an LLM call, a tool call or a task, so that the values it carries are read as such
ROLES = [
    {N.OPERATION: "chat", N.PROVIDER: "openai", N.REQUEST_MODEL: "gpt-4o", N.TASK_ID: "odd-task"},
    {N.OPERATION: "execute_tool", N.TOOL_NAME: "grep", N.TASK_ID: "odd-task"},
    {N.TASK_KIND: "review", N.TASK_ID: "odd-task"},
    {N.OPERATION: "invoke_agent", "openinference.span.kind": "LLM"},
    {},
]
roles = st.sampled_from(ROLES).map(lambda r: {k: AnyValue(string_value=v) for k, v in r.items()})
ROLE_NAMES = {C.OPERATION, C.OI_SPAN_KIND, C.LLM_REQUEST_TYPE, C.TRACELOOP_SPAN_KIND, *C.WORKFLOW_NAME}


def _odd_attributes(role: dict[str, AnyValue], hostile: dict[str, AnyValue]) -> dict[str, AnyValue]:
    """The hostile values, but for the names that decide what the span is, when it has a role."""
    return {**{k: v for k, v in hostile.items() if not role or k not in ROLE_NAMES}, **role}


U64 = 2**64 - 1


@dataclass(frozen=True)
class Odd:
    """A hostile span's fields (empty ids: fresh random ones, made per request); ``storable`` says whether a record
    can be made of it at all."""

    trace_id: bytes
    span_id: bytes
    start: int
    end: int
    attributes: dict[str, AnyValue] = dataclasses.field(default_factory=dict)

    def fresh(self) -> Odd:
        return dataclasses.replace(
            self, trace_id=self.trace_id or os.urandom(16), span_id=self.span_id or os.urandom(8)
        )

    @property
    def storable(self) -> bool:
        return (
            len(self.trace_id) == 16
            and len(self.span_id) == 8
            and any(self.trace_id)
            and any(self.span_id)
            and 0 < self.start < 2**63
            and 0 < self.end < 2**63
        )


odd_spans = st.lists(
    st.builds(
        Odd,
        trace_id=st.sampled_from([b"", b"\x00" * 16, b"\x01" * 15, b"\x01" * 16]),
        span_id=st.sampled_from([b"", b"\x00" * 8, b"\x02" * 9]),
        start=st.sampled_from([T0, 0, U64, 2**63, T0 + 10**9]),
        end=st.sampled_from([T0 + 5 * 10**9, T0 - 4_600_000_000, 0, U64, T0]),
        attributes=st.builds(_odd_attributes, roles, attributes),
    ),
    min_size=1,
    max_size=3,
)


def _request(odds: list[Odd], resource_attrs: dict[str, AnyValue]) -> tuple[Any, set[str], list[Odd]]:
    """Good spans (a task with its calls and tool), the odd spans beside them, and a second resource whose good
    spans carry ``resource_attrs``. Returns the request, the good spans' ids and the odd spans as sent."""
    req = sample_request()
    good = {s.span_id.hex() for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans}
    scope = req.resource_spans[0].scope_spans[0]
    odds = [odd.fresh() for odd in odds]
    for odd in odds:
        scope.spans.append(
            Span(
                trace_id=odd.trace_id,
                span_id=odd.span_id,
                name="odd",
                kind=99,
                start_time_unix_nano=odd.start,
                end_time_unix_nano=odd.end,
                attributes=[KeyValue(key=k, value=v) for k, v in odd.attributes.items()],
            )
        )
    other = sample_request().resource_spans[0]
    other.resource.attributes.extend(KeyValue(key=k, value=v) for k, v in resource_attrs.items())
    good |= {s.span_id.hex() for ss in other.scope_spans for s in ss.spans}
    req.resource_spans.append(other)
    return req, good, odds


def _stored(store: DuckDBStore, ids: set[str]) -> int:
    marks = ", ".join("?" for _ in ids)
    return int(store.query(f"SELECT count(*) FROM spans WHERE span_id IN ({marks})", sorted(ids)).rows[0][0])


def _app(db: Any, decode_workers: int) -> Iterator[tuple[TestClient, DuckDBStore]]:
    store = DuckDBStore.open(db)
    settings = Settings(db=db, decode_workers=decode_workers, pricing_attributes=PRICING)
    with TestClient(create_app(settings, store, dashboards=False)) as client:
        yield client, store
    store.close()


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, DuckDBStore]]:
    """The app decoding in the serving process."""
    yield from _app(tmp_path_factory.mktemp("hostile") / "h.duckdb", 0)


@pytest.fixture(scope="module")
def http_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, DuckDBStore]]:
    """The app decoding in a decode worker process (which types the rows as Arrow tables there)."""
    yield from _app(tmp_path_factory.mktemp("hostile-w") / "w.duckdb", 1)


@pytest.fixture(scope="module")
def grpc_col(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with grpc_collector(tmp_path_factory.mktemp("hostile-grpc") / "g.duckdb", pricing_attributes=PRICING) as col:
        yield col


def _check(rejected: int, message: str, store: DuckDBStore, good: set[str], odds: list[Odd]) -> None:
    assert _stored(store, good) == len(good), f"good spans lost; the server said: {message}"
    assert rejected == sum(not odd.storable for odd in odds), message
    kept = {odd.span_id.hex() for odd in odds if odd.storable}
    if kept:
        assert _stored(store, kept) == len(kept), message


@pytest.mark.parametrize("where", ["http", "http_worker"])
@BUDGET
@given(odds=odd_spans, resource_attrs=attributes, as_json=st.booleans(), gz=st.booleans())
def test_odd_values_over_http_cost_at_most_their_span(
    request: pytest.FixtureRequest,
    where: str,
    odds: list[Odd],
    resource_attrs: dict[str, AnyValue],
    as_json: bool,
    gz: bool,
) -> None:
    client, store = request.getfixturevalue(where)
    req, good, odds = _request(odds, resource_attrs)
    body = json.dumps(to_otlp_json(req)).encode() if as_json else req.SerializeToString()
    headers = {"Content-Type": "application/json" if as_json else "application/x-protobuf"}
    if gz:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    r = client.post("/v1/traces", content=body, headers=headers)
    assert r.status_code == 200, r.text
    if as_json:
        partial = r.json().get("partialSuccess", {})
        rejected, message = int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", "")
    else:
        resp = trace_service_pb2.ExportTraceServiceResponse.FromString(r.content)
        rejected, message = resp.partial_success.rejected_spans, resp.partial_success.error_message
    _check(rejected, message, store, good, odds)


@BUDGET
@given(odds=odd_spans, resource_attrs=attributes)
def test_odd_values_over_grpc_cost_at_most_their_span(
    grpc_col: Collector, odds: list[Odd], resource_attrs: dict[str, AnyValue]
) -> None:
    req, good, odds = _request(odds, resource_attrs)
    with grpc.insecure_channel(grpc_col.grpc_endpoint) as channel:
        resp = trace_service_pb2_grpc.TraceServiceStub(channel).Export(req, timeout=30)
    _check(resp.partial_success.rejected_spans, resp.partial_success.error_message, grpc_col.store, good, odds)


@pytest.mark.parametrize(
    "sent, stored",
    [
        ("0.30000000000000004", Decimal("0.300000000000")),  # what cost_usd=0.1*3 sends
        ("0.0000000000005", Decimal("0.000000000000")),  # half to even: down
        ("0.0000000000015", Decimal("0.000000000002")),  # half to even: up
        ("1E-13", Decimal("0E-12")),
        ("1e26", None),  # does not fit DECIMAL(38, 12): NULL, with a warning
        ("1e15", None),  # fits, but a few such amounts in one task would not add up: NULL, with a warning
        ("999999999999999.999999999999", Decimal("999999999999999.999999999999")),
        ("999999999999999.9999999999995", None),  # rounds to 10^15
        ("-0.5", None),
        ("NaN", None),
        ("12.5", Decimal("12.500000000000")),
    ],
)
def test_money_is_rounded_to_the_stores_scale_half_to_even(
    http: tuple[TestClient, DuckDBStore], sent: str, stored: Decimal | None
) -> None:
    client, store = http
    req = sample_request()
    tool = next(s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans if s.name.startswith("exec"))
    for kv in tool.attributes:
        if kv.key == "taskcost.tool.cost_usd":
            kv.value.string_value = sent
    r = client.post("/v1/traces", content=req.SerializeToString(), headers=PB)
    assert r.status_code == 200, r.text
    row = store.query("SELECT cost_usd FROM tool_calls WHERE span_id = ?", [tool.span_id.hex()]).rows
    assert row == [(stored,)]
    warning = trace_service_pb2.ExportTraceServiceResponse.FromString(r.content).partial_success.error_message
    assert ("taskcost.tool.cost_usd" in warning) == (stored is None)


def test_a_span_ending_before_it_starts_is_kept_with_no_duration(http: tuple[TestClient, DuckDBStore]) -> None:
    client, store = http
    req = sample_request()
    span = req.resource_spans[0].scope_spans[0].spans[0]
    span.end_time_unix_nano = span.start_time_unix_nano - 4_600_000_000
    r = client.post("/v1/traces", content=req.SerializeToString(), headers=PB)
    assert r.status_code == 200
    assert (
        "end before start"
        in trace_service_pb2.ExportTraceServiceResponse.FromString(r.content).partial_success.error_message
    )
    row = store.query("SELECT start_ns, end_ns FROM spans WHERE span_id = ?", [span.span_id.hex()]).rows
    assert row == [(span.start_time_unix_nano, span.start_time_unix_nano)]


def _gz(data: bytes) -> bytes:
    """gzip with a fixed mtime: the same bytes in every process (parallel workers collect the same ids)."""
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize(
    "body, encoding, status",
    [
        pytest.param(_gz(b"{}") + _gz(b""), "gzip", 200, id="two-members"),  # read whole
        pytest.param(_gz(b"{}") + b"trailing", "gzip", 400, id="trailing-bytes"),
        pytest.param(_gz(b"{") + _gz(b"}"), "gzip", 200, id="message-split-across-members"),
        pytest.param(zlib.compress(b"{}") + b"\x00\x00", "deflate", 400, id="deflate-trailing"),
        pytest.param(_gz(b"{}")[:-4], "gzip", 400, id="truncated"),
    ],
)
def test_compressed_bodies_are_read_whole_or_refused(
    http: tuple[TestClient, DuckDBStore], body: bytes, encoding: str, status: int
) -> None:
    client, _ = http
    r = client.post(
        "/v1/traces", content=body, headers={"Content-Type": "application/json", "Content-Encoding": encoding}
    )
    assert r.status_code == status, r.text
