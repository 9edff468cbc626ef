"""One provider response counts once: the spans of one LLM call, from several instrumentations, fold into one.

The span shapes here are the ones the real libraries emit (see test_interop_anthropic.py for the libraries
themselves): the `anthropic` client's own span beside OpenLLMetry's (siblings, same response id), inside
OpenInference's (nested, OpenInference has no response id attribute), and the taskcost SDK around them.
"""

from __future__ import annotations

from typing import Any

from taskcost.normalize import NormalizeRules, normalize_request
from tests.interop.otlp import S, request, span_hex

CLIENT = "com.anthropic.sdk.python"
OL = "opentelemetry.instrumentation.anthropic"
OI = "openinference.instrumentation.anthropic"


def client_span(sid: int, parent: int | None, rid: str | None = "msg_1", output: int = 120, **kw: Any) -> S:
    attrs = {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.usage.input_tokens": 2500,
        "gen_ai.usage.cache_read.input_tokens": 1800,
        "gen_ai.usage.cache_write.input_tokens": 500,
        "gen_ai.usage.output_tokens": output,
        "server.address": "api.anthropic.com",
    }
    if rid:
        attrs["gen_ai.response.id"] = rid
    return S("anthropic.messages.create", sid, parent=parent, attrs=attrs, scope=CLIENT, **kw)


def openllmetry_span(sid: int, parent: int | None, rid: str | None = "msg_1", output: int = 121, **kw: Any) -> S:
    attrs = {
        "gen_ai.provider.name": "anthropic",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.usage.input_tokens": 2500,
        "gen_ai.usage.output_tokens": output,
        "gen_ai.usage.total_tokens": 2500 + output,
        "gen_ai.usage.cache_read.input_tokens": 1800,
        "gen_ai.usage.cache_creation.input_tokens": 500,
    }
    if rid:
        attrs["gen_ai.response.id"] = rid
    return S("anthropic.chat", sid, parent=parent, attrs=attrs, scope=OL, **kw)


def openinference_span(sid: int, parent: int | None, rid: str | None = "msg_1", **kw: Any) -> S:
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.provider": "anthropic",
        "llm.system": "anthropic",
        "llm.request.model_name": "claude-sonnet-4-5",
        "llm.model_name": "claude-sonnet-4-5-20250929",
        "llm.token_count.prompt": 2500,
        "llm.token_count.completion": 120,
        "llm.token_count.prompt_details.cache_read": 1800,
        "llm.token_count.prompt_details.cache_write": 500,
        "llm.token_count.total": 2620,
        "session.id": "sess-7",
    }
    if rid:
        attrs |= {"output.mime_type": "application/json", "output.value": f'{{"id": "{rid}", "type": "message"}}'}
    return S("messages.create", sid, parent=parent, attrs=attrs, scope=OI, **kw)


ROOT = S("agent turn", 1)


def calls(*spans: S, rules: NormalizeRules | None = None):
    req = request(*spans)
    return normalize_request(req, rules) if rules else normalize_request(req)


def test_openllmetry_and_client_siblings_with_one_response_id_count_once() -> None:
    batch = calls(
        ROOT,
        openllmetry_span(2, 1, start_ms=10, end_ms=300),
        client_span(3, 1, start_ms=12, end_ms=298),
    )
    assert len(batch.spans) == 3  # every span is still kept raw
    [call] = batch.llm_calls
    # OpenLLMetry's stream bug reports 121 output tokens; the client's span, nearest the wire, says 120
    assert (call.input_tokens, call.cache_read_tokens, call.cache_write_tokens, call.output_tokens) == (
        2500,
        1800,
        500,
        120,
    )
    assert (call.response_id, call.server_address, call.provider) == ("msg_1", "api.anthropic.com", "anthropic")


def test_client_span_nested_in_openinference_counts_once() -> None:
    batch = calls(
        ROOT,
        openinference_span(2, 1, rid=None, start_ms=10, end_ms=300),  # no response id anywhere on it
        client_span(3, 2, start_ms=12, end_ms=298),
    )
    [call] = batch.llm_calls
    assert (call.input_tokens, call.output_tokens, call.response_id) == (2500, 120, "msg_1")
    # the session id sits on OpenInference's span only: the folded call keeps it
    assert (call.task_id, call.conversation_id) == ("sess-7", "sess-7")


def test_openinference_stream_sibling_folds_by_the_id_in_its_output_value() -> None:
    batch = calls(
        ROOT,
        openinference_span(2, 1, rid="msg_2", start_ms=10, end_ms=300),
        client_span(3, 1, rid="msg_2", start_ms=40, end_ms=290),
    )
    assert len(batch.llm_calls) == 1


def test_overlapping_siblings_of_different_scopes_with_equal_usage_count_once() -> None:
    batch = calls(
        ROOT,
        openinference_span(2, 1, rid=None, start_ms=10, end_ms=300),
        client_span(3, 1, rid=None, start_ms=40, end_ms=290),
    )
    assert len(batch.llm_calls) == 1


def test_parallel_identical_calls_of_one_instrumentation_stay_two_calls() -> None:
    batch = calls(
        ROOT,
        client_span(2, 1, rid=None, start_ms=10, end_ms=300),
        client_span(3, 1, rid=None, start_ms=11, end_ms=301),
    )
    assert len(batch.llm_calls) == 2


def test_different_response_ids_are_different_calls_whatever_else_matches() -> None:
    batch = calls(
        ROOT,
        openllmetry_span(2, 1, rid="msg_a", output=120, start_ms=10, end_ms=300),
        client_span(3, 1, rid="msg_b", start_ms=10, end_ms=300),
    )
    assert sorted(c.response_id or "" for c in batch.llm_calls) == ["msg_a", "msg_b"]


def test_siblings_that_do_not_overlap_in_time_are_two_calls() -> None:
    batch = calls(
        ROOT,
        openinference_span(2, 1, rid=None, start_ms=10, end_ms=100),
        client_span(3, 1, rid=None, start_ms=200, end_ms=300),
    )
    assert len(batch.llm_calls) == 2


def test_the_same_response_id_in_two_traces_is_two_calls() -> None:
    batch = calls(client_span(2, None, trace=1), client_span(3, None, trace=2))
    assert len(batch.llm_calls) == 2


def test_sdk_span_around_an_instrumented_call_keeps_the_sdk_identity_and_the_wire_usage() -> None:
    """The agent's own llm_call (attempt 2 of call c-9, marked failed: invalid JSON) wraps the client's span. The
    agent forgot Anthropic's cache in its input count; the client's span has the right one."""
    sdk = S(
        "chat claude-sonnet-4-5",
        2,
        parent=1,
        start_ms=5,
        end_ms=320,
        error="invalid_json",
        scope="taskcost_sdk",
        attrs={
            "taskcost.task.id": "task-1",
            "taskcost.call.id": "c-9",
            "taskcost.call.attempt": 2,
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4-5",
            "error.type": "invalid_json",
            "taskcost.harness.version": "h1",
        },
    )
    task = S(
        "task review", 1, attrs={"taskcost.task.id": "task-1", "taskcost.task.kind": "review"}, scope="taskcost_sdk"
    )
    batch = calls(task, sdk, client_span(3, 2, start_ms=10, end_ms=300))
    [call] = batch.llm_calls
    assert (call.span_id, call.task_id, call.call_id, call.attempt) == (span_hex(2), "task-1", "c-9", 2)
    assert (call.status, call.error_type, call.harness_version) == ("error", "invalid_json", "h1")
    assert (call.input_tokens, call.cache_read_tokens, call.cache_write_tokens, call.output_tokens) == (
        2500,
        1800,
        500,
        120,
    )
    assert call.response_model == "claude-sonnet-4-5-20250929"


def test_three_stacked_spans_of_one_call_count_once() -> None:
    batch = calls(
        ROOT,
        openinference_span(2, 1, rid=None, start_ms=5, end_ms=320),
        openllmetry_span(3, 2, rid=None, output=120, start_ms=8, end_ms=310),
        client_span(4, 3, start_ms=10, end_ms=300),
    )
    assert len(batch.llm_calls) == 1


def test_a_wrapper_around_two_calls_is_not_a_third_call() -> None:
    wrapper = S("llm chain", 2, parent=1, attrs={"openinference.span.kind": "LLM"}, scope="framework")
    batch = calls(
        ROOT, wrapper, client_span(3, 2, rid="msg_a"), client_span(4, 2, rid="msg_b", start_ms=200, end_ms=300)
    )
    assert sorted(c.response_id or "" for c in batch.llm_calls) == ["msg_a", "msg_b"]
    # a wrapper reporting their summed usage is also theirs, not its own
    summed = S(
        "llm chain",
        2,
        parent=1,
        scope="framework",
        attrs={"openinference.span.kind": "LLM", "llm.token_count.prompt": 5000, "llm.token_count.completion": 240},
    )
    batch = calls(
        ROOT, summed, client_span(3, 2, rid="msg_a"), client_span(4, 2, rid="msg_b", start_ms=200, end_ms=300)
    )
    assert len(batch.llm_calls) == 2
    # one reporting something else is a call of its own
    other = S(
        "llm", 2, parent=1, scope="framework", attrs={"openinference.span.kind": "LLM", "llm.token_count.prompt": 7}
    )
    batch = calls(ROOT, other, client_span(3, 2, rid="msg_a"), client_span(4, 2, rid="msg_b", start_ms=200, end_ms=300))
    assert len(batch.llm_calls) == 3


def test_a_nested_llm_span_with_different_usage_is_another_call() -> None:
    parent = S(
        "plan",
        2,
        parent=1,
        scope="framework",
        attrs={"openinference.span.kind": "LLM", "llm.token_count.prompt": 7, "llm.token_count.completion": 1},
    )
    batch = calls(ROOT, parent, client_span(3, 2))
    assert len(batch.llm_calls) == 2


def test_the_same_span_twice_in_one_request_counts_once() -> None:
    batch = calls(ROOT, client_span(2, 1), client_span(2, 1))
    assert len(batch.llm_calls) == 1


def test_vllm_server_span_inside_the_client_span_is_no_second_call() -> None:
    client = S(
        "openai.chat",
        2,
        parent=1,
        scope="opentelemetry.instrumentation.openai.v1",
        start_ms=0,
        end_ms=500,
        attrs={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "llama-3.1-8b",
            "gen_ai.usage.input_tokens": 900,
            "gen_ai.usage.output_tokens": 64,
        },
    )
    server = S(
        "llm_request",
        3,
        parent=2,
        scope="vllm.llm_engine",
        start_ms=20,
        end_ms=480,
        attrs={
            "gen_ai.usage.prompt_tokens": 900,
            "gen_ai.usage.completion_tokens": 64,
            "gen_ai.usage.cached_tokens": 512,
        },
    )
    batch = calls(ROOT, client, server)
    [call] = batch.llm_calls  # the engine's span is an engine span, tied to this call by the store
    assert (call.span_id, call.input_tokens, call.cache_read_tokens) == (span_hex(2), 900, None)
    assert [(e.parent_span_id, e.cached_tokens, e.engine) for e in batch.engine_spans] == [(span_hex(2), 512, "vllm")]


def test_folding_can_be_turned_off() -> None:
    batch = calls(
        ROOT,
        openllmetry_span(2, 1),
        client_span(3, 1),
        rules=NormalizeRules(fold_duplicates=False),
    )
    assert len(batch.llm_calls) == 2


def test_cost_through_the_price_step_counts_the_response_once() -> None:
    """The same response seen by three instrumentations is priced once, at its real usage."""
    from decimal import Decimal

    from taskcost.store import prepare_batch

    batch = calls(
        ROOT,
        openinference_span(2, 1, rid=None, start_ms=5, end_ms=320),
        client_span(3, 2, start_ms=10, end_ms=300),
        openllmetry_span(4, 1, start_ms=6, end_ms=310),
    )
    cols = prepare_batch(batch, 0).columns["llm_call_rows"]
    M = Decimal(1_000_000)
    # claude-sonnet-4-5: input $3, cache read $0.30, cache write $3.75, output $15 per million tokens
    expected = (200 * Decimal(3) + 1800 * Decimal("0.30") + 500 * Decimal("3.75") + 120 * Decimal(15)) / M
    assert cols["cost_usd"] == [expected]
