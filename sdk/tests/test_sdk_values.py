"""Odd numbers a user passes never raise into their code and never make a span the OTLP exporter cannot encode (one
such span fails the export of its whole batch): money is converted as sdk/README.md says, counts and times that OTLP
cannot carry are dropped with a warning. Property-based, with a fixed budget (derandomized: a failure prints the
example and replays the same way)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import taskcost_sdk as tc
from taskcost_sdk._internal.values import coerce_cost
from taskcost_sdk.testing import CapturedSpans

BUDGET = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
WIDE = Context(prec=60)
COST = "taskcost.tool.cost_usd"


def stored(amount: Decimal) -> Decimal:
    """What the collector keeps of an amount: 12 places, half to even (docs/conventions.md)."""
    return amount.quantize(Decimal("1e-12"), rounding=ROUND_HALF_EVEN, context=WIDE)


def test_a_float_is_sent_by_its_shortest_repr_and_the_collector_rounds_it(taskcost_spans: CapturedSpans) -> None:
    with tc.task("t") as t, t.tool("x", cost_usd=0.1 * 3):
        pass
    [attrs] = taskcost_spans.attributes("execute_tool")
    assert attrs[COST] == "0.30000000000000004"
    assert stored(Decimal(attrs[COST])) == Decimal("0.300000000000")


@BUDGET
@given(st.floats() | st.sampled_from([0.1 * 3, 5e-324, 1e-13, 1e15, 1e15 - 0.125, -0.0, 2.5e-12]))
def test_any_float_amount_is_sent_exactly_or_dropped(f: float) -> None:
    sent = coerce_cost(f)
    if not math.isfinite(f) or f < 0 or f >= 1e15:
        assert sent is None
        return
    assert sent is not None and len(sent) <= 48 and "e" not in sent.lower()
    exact = Decimal(repr(f))
    assert stored(Decimal(sent)) == stored(exact)  # what is stored is the float's shortest repr, rounded once
    if exact.as_tuple().exponent >= -30:  # type: ignore[operator]
        assert Decimal(sent) == exact  # sent as it is


decimals = st.builds(
    lambda sign, digits, exponent: Decimal((sign, tuple(digits), exponent)),
    st.integers(0, 1),
    st.lists(st.integers(0, 9), min_size=1, max_size=40),
    st.integers(-(10**9), 10**9) | st.integers(-45, 20),
) | st.decimals(allow_nan=True, allow_infinity=True)


@BUDGET
@given(decimals)
def test_any_decimal_amount_is_sent_in_a_short_text_with_the_same_stored_value(d: Decimal) -> None:
    sent = coerce_cost(d)
    if not d.is_finite() or d < 0 or d >= Decimal(10) ** 15:
        assert sent is None
        return
    assert sent is not None and len(sent) <= 48
    assert stored(Decimal(sent)) == stored(d)


hostile: Any = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64, -1, 0, 10**30]),
    st.floats(),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["9" * 5000, "\u00b2", "1e26", "NaN", "0.30000000000000004"]),
    st.none(),
    st.booleans(),
    st.just([1, 2]),
)
times: Any = st.one_of(
    st.none(),
    st.integers(-(2**65), 2**65),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.just(datetime(2262, 4, 12)),
)


@BUDGET
@given(
    cost=hostile,
    tokens=st.tuples(hostile, hostile, hostile, hostile, hostile),
    ttft=hostile,
    attempt=hostile,
    start=times,
    end=times,
    duration=hostile,
    gpu_count=hostile,
)
def test_odd_numbers_never_raise_and_the_spans_always_encode(
    taskcost_spans: CapturedSpans,
    cost: Any,
    tokens: tuple[Any, ...],
    ttft: Any,
    attempt: Any,
    start: Any,
    end: Any,
    duration: Any,
    gpu_count: Any,
) -> None:
    taskcost_spans.clear()
    inp, out, read, write, reasoning = tokens
    with tc.task("review") as t:
        with t.tool("search", cost_usd=cost) as tool:
            tool.set_cost(cost)
        t.record_llm_call(
            "openai",
            "gpt-4o",
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=read,
            cache_write_tokens=write,
            reasoning_tokens=reasoning,
            ttft_s=ttft,
            attempt=attempt,
            start_time=start,
            end_time=end,
            duration_s=duration,
            gpu_count=gpu_count,
        )
        with t.llm_call("anthropic", "claude-sonnet-4", attempt=attempt) as c:
            c.set_usage(input_tokens=inp, output_tokens=out, cache_read_tokens=read)
            c.set_ttft(ttft)
    spans = taskcost_spans.spans()
    assert len(spans) == 4
    encode_spans(spans)  # what the OTLP exporter sends: a value it cannot encode would lose the whole batch
    for s in spans:
        assert s.start_time is not None and s.end_time is not None
        assert 0 <= s.start_time <= s.end_time < 2**63
    [tool_attrs] = taskcost_spans.attributes("execute_tool")
    if COST in tool_attrs:
        assert stored(Decimal(tool_attrs[COST])) < Decimal(10) ** 15


def test_a_time_beyond_2262_is_dropped_not_sent(taskcost_spans: CapturedSpans) -> None:
    far = datetime(2262, 4, 12) + timedelta(days=1)
    call = tc.record_llm_call("openai", "gpt-4o", input_tokens=1, output_tokens=1, start_time=far, end_time=2**64)
    assert call is not None
    [span] = taskcost_spans.spans("chat")
    assert span.end_time is not None and span.end_time < 2**63
    encode_spans([span])
