"""decode_json (the hand-written OTLP/JSON converter in normalize._json) against the ParseDict-based decoder it
replaced, kept here as the oracle: the same message for every body the oracle accepts, a DecodeError (and no other
exception) for every body it rejects. Generated documents follow the trace schema with every JSON-mapping liberty
ParseDict allows (both field spellings, nulls, numbers as strings, enum names, unknown fields, strings for
messages ...) and wrong types, bad hex, out-of-range numbers and the like mixed in; plus realistic traffic."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.traffic import requests, to_json
from taskcost.normalize import decode_json
from tests.budget import examples
from tests.json_oracle import assert_same, dumps, span_doc
from tests.otlp_samples import sample_request, to_otlp_json

# --- documents that follow the schema, with every liberty and many mistakes --------------------------------------

_HEX_IDS = {("Span", "trace_id"), ("Span", "span_id"), ("Span", "parent_span_id")}
_HEX_IDS |= {("Link", "trace_id"), ("Link", "span_id")}
_ODD_TEXT = ["", "\ud800", "a\udfff", "\ud83d\ude00", "\U0001f600", "é", "\x00", "[x]", "key", "values"]
_WRONG = [None, True, False, 0, 1, -1, 1.5, [], {}, [1], {"a": 1}, "x"]
json_any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _text(bad: int) -> st.SearchStrategy[Any]:
    odd = st.sampled_from(_ODD_TEXT if bad else [t for t in _ODD_TEXT if "\ud800" not in t and "\udfff" not in t])
    return st.one_of(*[st.text(max_size=12)] * 6, odd, *[st.sampled_from(_WRONG)] * bad)


def _integer(low: int, high: int, bad: int) -> st.SearchStrategy[Any]:
    base = st.integers(low, high) | st.sampled_from([low, high, 0])
    edge = st.sampled_from([low - 1, high + 1, 2**63, 2**64, -(2**63) - 1, 10**30, -1, 1e19, 1.8e19, 2.0**64])
    odd_strings = ["1e3", "-1e3", " 5", "\t5", "5\n", "1_000", "+5", "-0", "0x10", "5.0", "5.5", "", "abc", "١٢"]
    odd_strings += ["1e400", "nan", "NaN", "inf", "Infinity", "9" * 5000, "1" + "0" * 25, "12 3", "٣"]
    odd = st.sampled_from([*odd_strings, True, False, 1.5, -2.5, float("nan"), float("inf"), 1e300, [], {}, [1]])
    return st.one_of(
        *[base, base.map(str)] * 3, base.map(float), *[edge, edge.map(str)] * (1 if bad else 0), *[odd] * bad
    )


def _double(bad: int) -> st.SearchStrategy[Any]:
    odd = ["NaN", "nan", "Infinity", "-Infinity", "inf", "-inf", " 1.5", "1_0", "abc", "", "1e400", "-0", "0x1p3"]
    odd_values: st.SearchStrategy[Any] = st.sampled_from([*odd, True, False, 10**400, -(10**400), 2**64, [], {}, None])
    good = st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.floats().map(repr)
    return st.one_of(*[good] * 3, st.floats(), *[odd_values] * bad)


def _hex(bad: int) -> st.SearchStrategy[Any]:
    good = st.binary(max_size=20).map(bytes.hex) | st.binary(min_size=8, max_size=16).map(lambda b: b.hex().upper())
    odd = st.sampled_from(["", "abc", "zz", "ab cd", " ab", "ab ", "0x12", "a b", "é", "\ud800", "ab\ncd", "ABCDEFab"])
    return st.one_of(*[good] * 4, *[odd, st.sampled_from(_WRONG)] * bad)


def _b64(bad: int) -> st.SearchStrategy[Any]:
    raw = st.binary(max_size=12)
    good = raw.map(lambda b: base64.b64encode(b).decode()) | raw.map(lambda b: base64.urlsafe_b64encode(b).decode())
    unpadded = raw.map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))
    odd = st.sampled_from(["a", "ab=", "abc=", "====", "!!", "a==b", "\ud800", "ab cd", "-_-_", "+/+/", "é"])
    return st.one_of(*[good, unpadded] * 2, *[odd, st.sampled_from(_WRONG)] * bad)


def _bool(bad: int) -> st.SearchStrategy[Any]:
    return st.one_of(*[st.booleans()] * 4, *[st.sampled_from([0, 1, "true", "false", 1.0, [], "True"])] * bad)


def _enum(field: FieldDescriptor, bad: int) -> st.SearchStrategy[Any]:
    names = [v.name for v in field.enum_type.values]
    numbers = [v.number for v in field.enum_type.values]
    good = st.sampled_from(numbers) | st.sampled_from(names) | st.integers(-5, 20)
    odd = st.sampled_from(
        ["BOGUS", "2", " 2", "2.0", "1e2", "", "span_kind_client", 2.0, 2.5, -1.5, True, False, float("nan")]
        + [float("inf"), -float("inf"), 2**31, -(2**31) - 1, 2**31 - 1, 10**20, [], {}, [1]]
    )
    return st.one_of(*[good] * 3, *[odd] * bad)


def _scalar(field: FieldDescriptor, owner: str, bad: int) -> st.SearchStrategy[Any]:
    t = field.type
    if (owner, field.name) in _HEX_IDS:
        return _hex(bad)
    if t == FieldDescriptor.TYPE_STRING:
        return _text(bad)
    if t == FieldDescriptor.TYPE_BYTES:
        return _b64(bad)
    if t == FieldDescriptor.TYPE_BOOL:
        return _bool(bad)
    if t == FieldDescriptor.TYPE_DOUBLE:
        return _double(bad)
    if t == FieldDescriptor.TYPE_ENUM:
        return _enum(field, bad)
    ranges = {
        FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
        FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
        FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
        FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
        FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
    }
    assert t in ranges, f"no strategy for {owner}.{field.name}"
    return _integer(*ranges[t], bad)


# The fields each message nearly always has, so that generated documents reach spans, attributes and nested values.
SPINE = {
    "ExportTraceServiceRequest": {"resource_spans"},
    "ResourceSpans": {"scope_spans"},
    "ScopeSpans": {"spans"},
    "Span": {"attributes", "trace_id", "span_id"},
    "KeyValue": {"key", "value"},
    "ArrayValue": {"values"},
    "KeyValueList": {"values"},
}
UNKNOWN_NAMES = ["[ext]", "[a.b_c]", "[x]\n", "[", "[]", "[a b]", "kind_", "Key", "\ud800", "xé"]


def _shuffled_dict(groups: tuple[Any, ...]) -> dict[str, Any]:
    entries = [e for g in groups[1:] for e in g]
    groups[0].shuffle(entries)
    return dict(entries)


class Docs:
    """JSON documents for a message type, reaching down to spans, attributes and nested values, with fields in any
    order, in either spelling, sometimes twice or null, and unknown fields; ``bad`` weighs how often a scalar value
    is of a wrong type or out of range (0: only odd spellings ParseDict may or may not take)."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.cache: dict[tuple[str, int], st.SearchStrategy[Any]] = {}

    def message(self, d: Descriptor, budget: int) -> st.SearchStrategy[Any]:
        key = (d.full_name, budget)
        if key not in self.cache:
            self.cache[key] = st.deferred(lambda: self._message(d, budget))
        return self.cache[key]

    def _entry(self, f: FieldDescriptor, d: Descriptor, budget: int) -> st.SearchStrategy[tuple[str, Any]]:
        return st.tuples(st.sampled_from([f.json_name, f.name]), self.value(f, d, budget))

    def _message(self, d: Descriptor, budget: int) -> st.SearchStrategy[Any]:
        fields = [f for f in d.fields if budget > 0 or f.message_type is None]
        spine = SPINE.get(d.name, set())
        groups = []
        oneof = [f for f in fields if f.containing_oneof is not None]
        if oneof:  # one member (a second one, or nulls, come from the extras below)
            groups.append(st.lists(st.one_of(*[self._entry(f, d, budget) for f in oneof]), min_size=1, max_size=1))
        for f in fields:
            if f.containing_oneof is None:
                size = 1 if f.name in spine else 0
                groups.append(st.lists(self._entry(f, d, budget), min_size=size, max_size=1))
        # With bad=0, only extras that ParseDict takes: nulls but not for hex ids, unknown names but not
        # extension-like or invalid ones, a second spelling but not of a oneof member.
        nullable = [f for f in d.fields if self.bad or (d.name, f.name) not in _HEX_IDS]
        any_field = st.sampled_from([(f.json_name, f.name) for f in nullable] or [("x", "y")])
        unknown_names = UNKNOWN_NAMES if self.bad else ["kind_", "Key", "xé", "foo"]
        extras = st.one_of(
            any_field.flatmap(lambda names: st.tuples(st.sampled_from(names), st.none())),  # null
            st.tuples(st.text(st.characters(codec="utf-8"), max_size=5) | st.sampled_from(unknown_names), json_any),
            *[self._entry(f, d, budget) for f in fields if self.bad or f.containing_oneof is None],  # a second one
        )
        groups.append(st.lists(extras, max_size=2))
        return st.tuples(st.randoms(use_true_random=False), *groups).map(_shuffled_dict)

    def value(self, f: FieldDescriptor, owner: Descriptor, budget: int) -> st.SearchStrategy[Any]:
        if f.message_type is not None:
            one = self.message(f.message_type, budget - 1)
        else:
            one = _scalar(f, owner.name, self.bad)
        if not f.is_repeated:
            return one
        spine = f.name in SPINE.get(owner.name, set())
        return st.lists(one, min_size=1 if spine else 0, max_size=2)


REQUEST = ExportTraceServiceRequest.DESCRIPTOR
valid_docs = Docs(bad=0).message(REQUEST, 8)
docs_with_mistakes = Docs(bad=1).message(REQUEST, 8)
PROPERTY = settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _all_messages(d: Descriptor, seen: dict[str, Descriptor]) -> dict[str, Descriptor]:
    if d.full_name not in seen:
        seen[d.full_name] = d
        for f in d.fields:
            if f.message_type is not None:
                _all_messages(f.message_type, seen)
    return seen


_OTHER_SPELLING = {
    name: other
    for d in _all_messages(REQUEST, {}).values()
    for f in d.fields
    for name, other in ((f.name, f.json_name), (f.json_name, f.name))
    if name != other
}
_ODD_VALUES = [*_WRONG, *_ODD_TEXT, "1e3", " 5", "\t5", "-1", "NaN", "nan", "Infinity", "zz", "ab cd", "a", "===="]
_ODD_VALUES += [2**64, 10**400, 1e300, float("nan"), float("inf"), 2.5, "SPAN_KIND_SERVER", "BOGUS", "[x]"]
odd_value = st.sampled_from(_ODD_VALUES) | json_any


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value in ``doc``."""
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*path, i))
    return out


def mutate(doc: Any, data: st.DataObject, times: int) -> Any:
    """``doc`` with ``times`` random edits: a value replaced (by an odd value, null, a string, itself in an
    array), a field removed, renamed to its other spelling, or repeated under it after the original."""
    for _ in range(times):
        paths = _paths(doc)[1:]
        if not paths:
            return doc
        where = data.draw(st.sampled_from(paths), label="where")
        parent = doc
        for step in where[:-1]:
            parent = parent[step]
        last = where[-1]
        op = data.draw(st.sampled_from(["replace", "replace", "null", "drop", "respell", "repeat", "wrap"]), label="op")
        if op == "replace":
            parent[last] = data.draw(odd_value, label="value")
        elif op == "null":
            parent[last] = None
        elif op == "wrap":
            parent[last] = [parent[last]]
        elif isinstance(parent, dict) and op == "drop":
            del parent[last]
        elif isinstance(parent, dict) and last in _OTHER_SPELLING:
            other = _OTHER_SPELLING[last]
            value = parent.pop(last) if op == "respell" else data.draw(odd_value | st.just(parent[last]), label="2nd")
            parent[other] = value
    return doc


@PROPERTY
@given(doc=valid_docs)
def test_same_as_parsedict_on_documents_in_every_spelling(doc: Any) -> None:
    assert_same(dumps(doc))


@PROPERTY
@given(doc=docs_with_mistakes)
def test_same_as_parsedict_on_documents_with_wrong_values(doc: Any) -> None:
    assert_same(dumps(doc))


@PROPERTY
@given(doc=valid_docs, data=st.data(), times=st.integers(1, 3))
def test_same_as_parsedict_on_edited_documents(doc: Any, data: st.DataObject, times: int) -> None:
    assert_same(dumps(mutate(doc, data, times)))


# --- realistic traffic and the SDK's own requests ---------------------------------------------------------------


def test_realistic_traffic_round_trips_and_matches_parsedict() -> None:
    for req in requests(3000, seed=11):
        body = to_json(req)
        assert decode_json(body) == req
        assert assert_same(body) == req.SerializeToString(deterministic=True)


def test_sdk_sample_round_trips() -> None:
    req = sample_request()
    body = json.dumps(to_otlp_json(req)).encode()
    assert decode_json(body) == req
    assert_same(body)


SAMPLE = to_otlp_json(sample_request())


@settings(max_examples=examples(80), deadline=None)
@given(data=st.data(), times=st.integers(1, 2))
def test_same_as_parsedict_on_edited_sdk_requests(data: st.DataObject, times: int) -> None:
    assert_same(dumps(mutate(json.loads(json.dumps(SAMPLE)), data, times)))


# --- attributes: the converter's fast path for {"key": str, "value": {one scalar}} and its edges -----------------

_scalars = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["x" * 126, "x" * 200, "é" * 70, "\ud800", "", "٣", "1e3", "-5", " 5", "5 ", "\t7", "1_0"]),
    st.integers() | st.integers(-(2**63) - 2, 2**64 + 2) | st.integers().map(str),
    st.floats(),
    st.booleans(),
    st.sampled_from([None, [], {}, [1], {"a": 1}, 10**400, 2**63, -(2**63), 16383, 16384, 2**21]),
)
_value_keys = ["stringValue", "intValue", "doubleValue", "boolValue", "bytesValue", "string_value", "int_value"]
_attr_values = st.one_of(
    *[st.dictionaries(st.sampled_from(_value_keys), _scalars, min_size=1, max_size=1)] * 4,
    st.dictionaries(st.sampled_from(_value_keys), _scalars, max_size=3),
    odd_value,
)
_keys = st.text(max_size=10) | st.sampled_from(["k" * 127, "k" * 128, "k" * 300, "\ud800", "", 5, None, ["k"]])
_attributes = st.lists(
    st.one_of(
        *[st.fixed_dictionaries({"key": _keys, "value": _attr_values})] * 6,
        st.fixed_dictionaries({"key": _keys}, optional={"value": _attr_values, "keyStrindex": _scalars}),
        st.fixed_dictionaries({"value": _attr_values, "key_strindex": _scalars}),
        odd_value,
    ),
    max_size=6,
)


@settings(max_examples=examples(100), deadline=None)
@given(attrs=_attributes, where=st.sampled_from(["span", "resource", "event", "kvlist"]))
def test_same_as_parsedict_on_attribute_lists(attrs: list[Any], where: str) -> None:
    if where == "span":
        doc = span_doc({"attributes": attrs})
    elif where == "event":
        doc = span_doc({"events": [{"attributes": attrs}]})
    elif where == "kvlist":
        doc = span_doc({"attributes": [{"key": "k", "value": {"kvlistValue": {"values": attrs}}}]})
    else:
        doc = {"resourceSpans": [{"resource": {"attributes": attrs}}]}
    assert_same(dumps(doc))
