"""Hostile input never gets a 5xx and never crashes the collector: property-based fuzzing of
/v1/traces (both content types, compressed or not) and schemathesis over the HTTP API's OpenAPI.
Bounded so CI stays fast; a failure prints the smallest input that breaks it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from schemathesis.checks import not_a_server_error

from taskcost.app import create_app
from taskcost.settings import Settings
from taskcost.store import DuckDBStore
from tests.budget import examples
from tests.otlp_samples import sample_request, to_otlp_json

FUZZ = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
VALID = sample_request().SerializeToString()
VALID_JSON = to_otlp_json(sample_request())


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FastAPI, DuckDBStore]]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb"
    store = DuckDBStore.open(db)
    app = create_app(Settings(db=db, max_body_bytes=256 * 1024), store, admin_token="fuzz-admin-token-0123456789")
    yield app, store
    store.close()


@pytest.fixture(scope="module")
def fuzz_client(fuzz_app: tuple[FastAPI, DuckDBStore]) -> Iterator[TestClient]:
    with TestClient(fuzz_app[0], raise_server_exceptions=False) as c:
        yield c


def _post(client: TestClient, body: bytes, ctype: str, gz: bool) -> int:
    headers = {"Content-Type": ctype}
    if gz:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    status = client.post("/v1/traces", content=body, headers=headers).status_code
    assert status < 500, f"{status} for a {len(body)}-byte {ctype} body"
    return status


@FUZZ
@given(
    body=st.binary(max_size=4096),
    gz=st.booleans(),
    ctype=st.sampled_from(["application/x-protobuf", "application/json"]),
)
def test_random_bytes(fuzz_client: TestClient, body: bytes, gz: bool, ctype: str) -> None:
    assert _post(fuzz_client, body, ctype, gz) in (200, 400, 413)


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_protobuf(fuzz_client: TestClient, flips: list[tuple[int, int]]) -> None:
    body = bytearray(VALID)
    for at, value in flips:
        body[at] = value
    _post(fuzz_client, bytes(body), "application/x-protobuf", False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
SPAN_KEYS = [
    "traceId",
    "spanId",
    "parentSpanId",
    "name",
    "kind",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "attributes",
    "status",
    "events",
    "links",
    "flags",
]


@FUZZ
@given(key=st.sampled_from(SPAN_KEYS), value=json_values, attr=json_values)
def test_wrong_types_in_otlp_json(fuzz_client: TestClient, key: str, value: object, attr: object) -> None:
    doc = json.loads(json.dumps(VALID_JSON))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    span[key] = value
    span.setdefault("attributes", [])
    if isinstance(span["attributes"], list):
        span["attributes"].append({"key": "gen_ai.usage.input_tokens", "value": attr})
    _post(fuzz_client, json.dumps(doc, allow_nan=True).encode(), "application/json", False)


@FUZZ
@given(tokens=st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True), st.text(max_size=20)))
def test_absurd_token_counts_are_ignored_not_fatal(fuzz_client: TestClient, tokens: object) -> None:
    req = sample_request()
    span = req.resource_spans[0].scope_spans[0].spans[1]
    value = AnyValue()
    if isinstance(tokens, int):
        value.int_value = tokens
    elif isinstance(tokens, float):
        value.double_value = tokens
    else:
        value.string_value = str(tokens)
    span.attributes.append(KeyValue(key="gen_ai.usage.output_tokens", value=value))
    assert _post(fuzz_client, req.SerializeToString(), "application/x-protobuf", False) == 200


def test_deeply_nested_attributes_and_json(fuzz_client: TestClient) -> None:
    req = sample_request()
    value = AnyValue(string_value="leaf")
    for _ in range(30):  # 90 message levels: about as deep as the protobuf library builds (limit 100)
        outer = AnyValue()
        outer.kvlist_value.values.append(KeyValue(key="k", value=value))
        value = outer
    req.resource_spans[0].scope_spans[0].spans[0].attributes.append(KeyValue(key="deep", value=value))
    assert _post(fuzz_client, req.SerializeToString(), "application/x-protobuf", False) in (200, 400)
    deep = "[" * 100_000 + "]" * 100_000
    assert _post(fuzz_client, deep.encode(), "application/json", False) == 400
    assert _post(fuzz_client, b'{"resourceSpans": "\xff\xfe"}', "application/json", False) == 400


def test_invalid_utf8_in_a_protobuf_string_is_a_400(fuzz_client: TestClient) -> None:
    body = bytearray(VALID)
    name = b"task code_review"
    at = body.find(name)
    assert at > 0
    body[at : at + 2] = b"\xff\xfe"
    assert _post(fuzz_client, bytes(body), "application/x-protobuf", False) in (200, 400)


def test_http_api_never_answers_5xx(fuzz_app: tuple[FastAPI, DuckDBStore]) -> None:
    """schemathesis generates requests for every operation of the OpenAPI schema (valid and
    invalid bodies, parameters, headers); none may get a server error."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", fuzz_app[0])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/sql", "/healthz", "/readyz", "/metrics", "/api/admin/keys"}
    for operation in operations:

        @settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        call()


def test_values_the_columns_cannot_hold_are_rejected_and_the_writer_lives_on(
    fuzz_client: TestClient, fuzz_app: tuple[FastAPI, DuckDBStore]
) -> None:
    """Found by the fuzzer: a start time beyond int64 nanoseconds once killed the writer thread, and
    every later request then waited forever."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    req = sample_request()
    spans = req.resource_spans[0].scope_spans[0].spans
    spans[1].start_time_unix_nano = 2**64 - 1
    spans[2].kind = 99  # an enum value no SDK sends: stored as unspecified
    spans[2].status.code = 77
    r = fuzz_client.post(
        "/v1/traces", content=req.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
    )
    assert r.status_code == 200
    assert ExportTraceServiceResponse.FromString(r.content).partial_success.rejected_spans == 1
    assert fuzz_app[1].writer_alive
    assert _post(fuzz_client, sample_request().SerializeToString(), "application/x-protobuf", False) == 200
