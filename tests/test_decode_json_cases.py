"""decode_json on named cases (accepted, rejected with the bad field's path, ParseDict's lenient values), the
depth limit, malformed and random bodies, and every field of the schema; each checked against the oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.descriptor import Descriptor
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from taskcost.normalize import DecodeError, decode_json, encode_json, key_value
from taskcost.normalize._json import MAX_DEPTH
from tests.budget import examples
from tests.json_oracle import assert_same, attr_doc, dumps, span_doc

REQUEST = ExportTraceServiceRequest.DESCRIPTOR

# --- cases worth naming (each also checked against the oracle) --------------------------------------------------


ACCEPTED = {
    "snake_case names": {
        "resource_spans": [{"scope_spans": [{"spans": [{"trace_id": "AB" * 16, "start_time_unix_nano": 5}]}]}]
    },
    "upper-case hex, int64 as a number": span_doc({"traceId": "AB" * 16, "spanId": "cd" * 8, "startTimeUnixNano": 7}),
    "hex with spaces between bytes": span_doc({"spanId": "ab cd ef 01 23 45 67 89"}),
    "empty ids": span_doc({"traceId": "", "spanId": "", "parentSpanId": ""}),
    "enum by name": span_doc({"kind": "SPAN_KIND_CLIENT", "status": {"code": "STATUS_CODE_ERROR"}}),
    "enum as a float or numeric string": span_doc({"kind": 2.7, "status": {"code": " 2"}}),
    "unknown enum number kept": span_doc({"kind": 99}),
    "unknown enum name ignored": span_doc({"kind": "SPAN_KIND_BOGUS", "status": {"code": "1e2"}}),
    "integers in ParseDict's other spellings": attr_doc({"intValue": "1e3"}),
    "int with a tab, underscore": span_doc({"startTimeUnixNano": "\t1_000", "droppedAttributesCount": 3.0}),
    "double as a string": attr_doc({"doubleValue": "NaN"}),
    "double from a bool": attr_doc({"doubleValue": True}),
    "bytes url-safe, unpadded": attr_doc({"bytesValue": "-_8"}),
    "string for a message": span_doc({"status": "ok", "events": ["x"]}),
    "array of non-field strings for a message": span_doc({"status": ["foo", "bar"]}),
    "null clears": span_doc({"name": "a", "status": None, "attributes": None}),
    "null for the other oneof member": attr_doc({"intValue": 5, "stringValue": None}),
    "null for the same oneof member, later": attr_doc({"intValue": 5, "int_value": None}),
    "later spelling wins": span_doc({"startTimeUnixNano": "5", "start_time_unix_nano": "0"}),
    "unknown fields": {"resourceSpans": [{"x": {"y": [1, 2]}, "scopeSpans": [{"spans": [{"zzz": None}]}]}], "q": 1},
    "oneof member at its default": attr_doc({"stringValue": ""}),
    "negative int64": attr_doc({"intValue": "-9223372036854775808"}),
    "nested arrays and kvlists": attr_doc(
        {"arrayValue": {"values": [{"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": False}}]}}]}}
    ),
    "entity refs": {"resourceSpans": [{"resource": {"entityRefs": [{"type": "t", "idKeys": ["a", ""]}]}}]},
    # orjson reads integers outside [-2**63, 2**64) as floats; json_wire gives json's reading where that matters
    "uint64 maximum as a number": span_doc({"endTimeUnixNano": 2**64 - 1}),
    "int64 minimum as a number": attr_doc({"intValue": -(2**63)}),
    "a double written as a 30-digit integer": attr_doc({"doubleValue": 10**29 + 7}),
    "long key and value (multi-byte lengths)": span_doc(
        {"attributes": [{"key": "k" * 300, "value": {"stringValue": "v" * 20000}}], "name": "n" * 20000}
    ),
}

REJECTED = {
    "not hex": (span_doc({"traceId": "zz"}), "resourceSpans[0].scopeSpans[0].spans[0].traceId is not hex"),
    "odd hex": (span_doc({"spanId": "abc"}), "spans[0].spanId is not hex"),
    "null id": (span_doc({"traceId": None}), "traceId must be a hex string"),
    "link id not a string": (span_doc({"links": [{"spanId": 5}]}), "links[0].spanId must be a hex string"),
    "span not an object": (span_doc("span"), "spans[0] must be an object"),
    "link not an object": (span_doc({"links": ["x"]}), "links[0] must be an object"),
    "int64 out of range": (attr_doc({"intValue": "9223372036854775808"}), "value.intValue is out of range"),
    "negative fixed64": (span_doc({"endTimeUnixNano": -1}), "endTimeUnixNano is out of range"),
    "fixed64 past 2**64 as a number (the error names it exactly)": (
        span_doc({"endTimeUnixNano": 2**64 + 1}),
        "endTimeUnixNano is out of range [0, 18446744073709551615]: 18446744073709551617",
    ),
    "int64 one below its minimum, as a number (as a float it would round to the minimum)": (
        attr_doc({"intValue": -(2**63) - 1}),
        "intValue is out of range [-9223372036854775808, 9223372036854775807]: -9223372036854775809",
    ),
    "uint32 out of range": (span_doc({"droppedLinksCount": 2**32}), "droppedLinksCount is out of range"),
    "enum out of range": (span_doc({"kind": 2**31}), "kind is out of range"),
    "enum infinite (escaped as OverflowError before)": (span_doc({"kind": float("inf")}), "kind is out of range"),
    "fractional int": (span_doc({"startTimeUnixNano": 1.5}), "startTimeUnixNano is not an integer"),
    "int with a space": (span_doc({"startTimeUnixNano": "1 000"}), "startTimeUnixNano is not an integer"),
    "bool for an int": (attr_doc({"intValue": True}), "intValue must be an integer"),
    "string for a bool": (attr_doc({"boolValue": "true"}), "boolValue must be true or false"),
    "NaN literal for a double": (attr_doc({"doubleValue": float("nan")}), "doubleValue is NaN"),
    "huge int for a double (escaped as OverflowError before)": (attr_doc({"doubleValue": 10**400}), "too large"),
    "number for a string": (span_doc({"name": 5}), "spans[0].name must be a string"),
    "unpaired surrogate": (span_doc({"name": "\ud800"}), "name has an unpaired surrogate"),
    "two oneof members": (attr_doc({"intValue": 1, "stringValue": "a"}), "value.stringValue is a second value"),
    "two spellings of one oneof member": (attr_doc({"intValue": 1, "int_value": 2}), "int_value is a second value"),
    "bad base64": (attr_doc({"bytesValue": "a"}), "bytesValue is not base64"),
    "extension name": (span_doc({"[foo.bar]": 1}), "spans[0].[foo.bar] names an extension"),
    "null in an array": (span_doc({"attributes": [None]}), "attributes[0] is null"),
    "array of field names for a message": (span_doc({"status": ["code"]}), "status must be an object"),
    "number for a message": (span_doc({"status": 5}), "status must be an object"),
    "object for an array": (span_doc({"events": {}}), "events must be an array"),
    "unhashable enum": (span_doc({"kind": [1]}), "kind must be an enum number or name"),
    "enum name with an unpaired surrogate": (span_doc({"kind": "\ud800"}), "kind is not a valid enum name"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_as_by_parsedict(name: str) -> None:
    body = dumps(ACCEPTED[name])
    assert isinstance(assert_same(body), bytes)


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected_with_the_path_of_the_bad_field(name: str) -> None:
    doc, message = REJECTED[name]
    body = dumps(doc)
    with pytest.raises(DecodeError) as err:
        decode_json(body)
    assert message in str(err.value)
    assert assert_same(body) == "DecodeError"


def test_values_where_parsedict_is_lenient() -> None:
    got = decode_json(dumps(span_doc({"kind": "SPAN_KIND_CLIENT", "startTimeUnixNano": "1e3", "status": "x"})))
    span = got.resource_spans[0].scope_spans[0].spans[0]
    assert (span.kind, span.start_time_unix_nano, span.HasField("status")) == (Span.SPAN_KIND_CLIENT, 1000, True)
    got = decode_json(dumps(span_doc({"kind": "SPAN_KIND_NOPE", "traceId": "AbCd"})))
    span = got.resource_spans[0].scope_spans[0].spans[0]
    assert (span.kind, span.trace_id) == (Span.SPAN_KIND_UNSPECIFIED, b"\xab\xcd")


def _nested(levels: int, kvlist: bool) -> dict[str, Any]:
    """A resource attribute (KeyValue at depth 4, its AnyValue at 5) nesting ``levels`` arrays or kvlists."""
    v: dict[str, Any] = {"intValue": 1}
    for _ in range(levels):
        v = {"kvlistValue": {"values": [{"key": "k", "value": v}]}} if kvlist else {"arrayValue": {"values": [v]}}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": v}]}}]}


@pytest.mark.parametrize("kvlist", [False, True])
def test_the_depth_limit_is_parsedicts(kvlist: bool) -> None:
    # AnyValue at depth 5; each array adds 2 (ArrayValue, AnyValue), each kvlist 3 (KeyValueList, KeyValue, AnyValue)
    step = 3 if kvlist else 2
    deepest = (MAX_DEPTH - 5) // step
    assert isinstance(assert_same(dumps(_nested(deepest, kvlist))), bytes)
    with pytest.raises(DecodeError, match="more than 100 deep"):
        decode_json(dumps(_nested(deepest + 1, kvlist)))
    assert assert_same(dumps(_nested(deepest + 1, kvlist))) == "DecodeError"
    # the same bound when the innermost value is a string standing for an (empty) message
    leaf = _nested(deepest, kvlist)
    assert_same(json.dumps(leaf).replace('{"intValue": 1}', '"x"').encode())


def test_orjson_reads_bodies_and_json_what_it_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    utf16 = json.dumps(span_doc({"name": "n", "kind": 2})).encode("utf-16")  # json reads UTF-16; orjson refuses it
    nan = dumps(attr_doc({"doubleValue": "NaN"})).replace(b'"NaN"', b"NaN")  # a NaN literal: json reads it
    plain = dumps(span_doc({"name": "n", "kind": 2}))
    assert decode_json(utf16) == decode_json(plain)
    assert_same(utf16)
    with pytest.raises(DecodeError, match="doubleValue is NaN"):
        decode_json(nan)
    assert_same(nan)

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("json.loads read a body orjson reads")

    monkeypatch.setattr(json, "loads", refused)
    assert decode_json(plain).resource_spans[0].scope_spans[0].spans[0].name == "n"


@pytest.mark.parametrize(
    "body",
    [b"", b"[", b"{not json", b"[]", b"null", b"5", b'"x"', b"\xff\xfe", b'{"resourceSpans": "\xff"}', b"{" * 5000]
    + [b'{"resourceSpans": [{"resource": {"droppedAttributesCount": ' + b"9" * 5000 + b"}}]}"],
)
def test_malformed_bodies_raise_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_json(body)


@settings(max_examples=examples(150), deadline=None)
@given(body=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@example(body=b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"kind": Infinity}]}]}]}')
def test_random_bytes_only_ever_raise_decode_error(body: bytes) -> None:
    assert_same(body)


def test_every_field_of_the_schema_round_trips() -> None:
    """A request with every field of every message set (so a field the converter missed, after an
    opentelemetry-proto upgrade, fails here), through the OTLP/JSON mapping and back."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add(schema_url="s")
    rs.resource.dropped_attributes_count = 1
    rs.resource.attributes.append(key_value("a", [1, 2.5, True, "x"]))
    rs.resource.entity_refs.add(schema_url="e", type="t", id_keys=["i"], description_keys=["d"])
    ss = rs.scope_spans.add(schema_url="s2")
    ss.scope.name, ss.scope.version, ss.scope.dropped_attributes_count = "n", "v", 2
    ss.scope.attributes.add(key="b", key_strindex=3).value.kvlist_value.values.add(key="c").value.bytes_value = b"\0"
    ss.scope.attributes.add(key="s").value.string_value_strindex = 4
    span = ss.spans.add(trace_id=b"\1" * 16, span_id=b"\2" * 8, parent_span_id=b"\3" * 8, trace_state="ts", flags=257)
    span.name, span.kind, span.start_time_unix_nano, span.end_time_unix_nano = "n", 3, 2**64 - 1, 1
    span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count = 1, 2, 3
    span.attributes.append(key_value("neg", -5))
    span.events.add(time_unix_nano=5, name="e", dropped_attributes_count=1).attributes.append(key_value("x", 1.5))
    link = span.links.add(trace_id=b"\4" * 16, span_id=b"\5" * 8, trace_state="l", dropped_attributes_count=2, flags=1)
    link.attributes.append(key_value("l", "v"))
    span.status.message, span.status.code = "m", 2
    every: set[str] = set()

    def walk(d: Descriptor) -> None:
        for f in d.fields:
            if f.full_name not in every:
                every.add(f.full_name)
                if f.message_type is not None:
                    walk(f.message_type)

    walk(REQUEST)
    set_fields: set[str] = set()

    def seen(m: Any) -> None:
        for f, v in m.ListFields():
            set_fields.add(f.full_name)
            for sub in v if f.is_repeated else [v]:
                if f.message_type is not None:
                    seen(sub)

    seen(req)
    assert set_fields == every, sorted(every - set_fields)
    body = json.dumps(encode_json(req)).encode()
    assert decode_json(body) == req
    assert_same(body)
