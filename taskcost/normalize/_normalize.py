"""One ExportTraceServiceRequest -> span, LLM call, tool call and task records. Pure: no state, no I/O.

Two passes: every span is read first (so a span can inherit its task id from an ancestor in the same request and
a trace root can tell whether GenAI work sits beneath it), then records are built and the spans of one provider
response are folded into one call (_fold).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from taskcost._internal.compact_json import compact_sorted
from taskcost.normalize import _conventions as C
from taskcost.normalize import _extract as X
from taskcost.normalize import _names as N
from taskcost.normalize._attrs import MAX_TOKENS, Attrs, pricing_value, to_money
from taskcost.normalize._engine import TOPOLOGY_NAMES, Topology, call_engine, engine_span, is_engine_span
from taskcost.normalize._fold import Candidate, fold_calls
from taskcost.normalize._limits import (
    ATTRIBUTE_BYTES,
    EVENT_BYTES,
    RESOURCE_COPIES,
    SPAN_BYTES,
    Cuts,
    dropped_count,
)
from taskcost.normalize._plan import call_plan
from taskcost.normalize._read import cut_attributes, cut_events, read_wire
from taskcost.normalize._records import (
    LLMCallRecord,
    NormalizedBatch,
    SpanRecord,
    TaskRecord,
    ToolCallRecord,
)
from taskcost.normalize._rules import DEFAULT_RULES, NormalizeRules

__all__ = ["normalize_request", "normalize_wire"]

# Bounds of the stored column types: a value outside is not real data (fuzzers and broken clients send them)
_MAX_NS = 2**63  # BIGINT nanoseconds: up to the year 2262
_MAX_KIND = 5  # SpanKind: UNSPECIFIED .. CONSUMER
_MAX_STATUS = 2  # StatusCode: UNSET, OK, ERROR
_MAX_ATTEMPT = 1_000_000
_INF = float("inf")

_ERROR = 2  # Status.STATUS_CODE_ERROR
_MAX_MESSAGES = 5  # NormalizedBatch's


# Context a call reads from one name each, usually set on the resource (the process), not on the span: read once per
# resource and shared by its spans, unless a span sets one of these names itself.
_CONTEXT_NAMES = frozenset(
    {
        N.ENGINE,
        N.ENGINE_VERSION,
        N.QUANTIZATION,
        N.GPU_TYPE,
        N.GPU_COUNT,
        N.CLUSTER_ID,
        N.DEPLOYMENT,
        N.IMAGE_NAME,
        N.IMAGE_TAGS,
        N.K8S_CLUSTER,
        N.CLOUD_REGION,
        N.HARNESS_VERSION,
        N.AGENT_VERSION,
        *TOPOLOGY_NAMES,
    }
)
_MAX_DEPTH = 256
_MAX_GPUS = 100_000


@dataclass(frozen=True, slots=True)
class _Context:
    engine: str | None
    engine_version: str | None
    quantization: str | None
    gpu_type: str | None
    gpu_count: int | None
    cluster_id: str | None
    deployment: str | None
    image_name: str | None
    image_tags: list[str] | None
    k8s_cluster: str | None
    cloud_region: str | None
    harness_version: str | None
    agent_version: str | None
    topology: Topology | None  # the topology and decoding tags (taskcost.parallel.*, taskcost.pd.*, taskcost.spec.*)

    @classmethod
    def read(cls, a: Attrs) -> _Context:
        return cls(
            a.text(N.ENGINE),
            a.text(N.ENGINE_VERSION),
            a.text(N.QUANTIZATION),
            a.text(N.GPU_TYPE),
            a.integer(N.GPU_COUNT, limit=_MAX_GPUS) or None,
            a.text(N.CLUSTER_ID),
            a.text(N.DEPLOYMENT),
            a.text(N.IMAGE_NAME),
            a.text_list(N.IMAGE_TAGS),
            a.text(N.K8S_CLUSTER),
            a.text(N.CLOUD_REGION),
            a.text(N.HARNESS_VERSION),
            a.text(N.AGENT_VERSION),
            Topology.read(a),
        )


@dataclass(frozen=True, slots=True)
class _Resource:
    """What the spans of one resource share."""

    attributes: dict[str, Any]
    json: str
    read: dict[str, Any]  # the attributes the normaliser may read (NormalizeRules.read_names): what Attrs merges
    service: str | None
    shared: _Context
    cost: int  # estimated bytes each span of this resource costs before its own attributes and events
    vllm: bool  # the resource is vLLM's (its spans are engine server spans)


@dataclass(slots=True)
class _Parsed:
    name: str
    events: list[dict[str, Any]]  # the span's events as stored (name, time_ns, attributes), as kept within the limits
    trace_id: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    failed: bool  # the span's status is ERROR
    scope_name: str
    attrs: Attrs
    service: str | None
    op: str | None
    role: str | None
    own_task_id: str | None
    shared: _Context | None  # the resource's context, when the span sets none of _CONTEXT_NAMES itself (else its own)
    key: tuple[str, str]  # (trace_id, span_id)


_CONTEXT_ORDER = tuple(sorted(_CONTEXT_NAMES))
_PLAIN = frozenset({str, int, type(None)})  # values whose equality is their reading's (True == 1, 1.0 == 1: not)


def _context(p: _Parsed, out: NormalizedBatch, seen: dict[tuple[Any, ...], _Context]) -> _Context:
    """The span's context: its resource's, or read from the span (once: its call and its task both read it; an odd
    value warns once). The fleet tags its self-hosted calls alike: a context read without a warning is kept in
    ``seen`` (one request's) by its values, and a span with the same values takes it."""
    if p.shared is not None:
        return p.shared
    key = tuple(map(p.attrs.get, _CONTEXT_ORDER))
    if _PLAIN.issuperset(map(type, key)):
        ctx = seen.get(key)
        if ctx is None:
            ignored = out.ignored_values
            ctx = _Context.read(p.attrs)
            if out.ignored_values == ignored:
                seen[key] = ctx
    else:
        ctx = _Context.read(p.attrs)
    p.shared = ctx
    return ctx


def normalize_request(
    req: ExportTraceServiceRequest, rules: NormalizeRules = DEFAULT_RULES, cuts: Cuts | None = None
) -> NormalizedBatch:
    """``normalize_wire`` of a request message (serialised first: the intake reads bodies, never messages)."""
    return normalize_wire(req.SerializeToString(), rules, cuts)


def normalize_wire(data: bytes, rules: NormalizeRules = DEFAULT_RULES, cuts: Cuts | None = None) -> NormalizedBatch:
    """The records of the ExportTraceServiceRequest whose protobuf wire form is ``data``, within ``rules.limits``:
    ``cuts`` counts what they cut and the request's estimated decoded size (raises DecodedTooLarge past
    ``max_decoded_bytes``); the JSON decoder may have filled it already. Raises DecodeError when ``data`` is not
    such a request."""
    out = NormalizedBatch()
    cuts = Cuts(rules.limits) if cuts is None else cuts
    limit = rules.limits.attribute_count
    parsed: list[_Parsed] = []
    for resource_attrs, scopes in read_wire(data, cuts):
        attrs = resource_attrs if type(resource_attrs) is dict else cut_attributes(resource_attrs, limit, cuts)
        service = attrs.get(N.SERVICE_NAME)
        read = {k: attrs[k] for k in attrs.keys() & rules.read_names}
        resource_json = compact_sorted(attrs)
        res = _Resource(
            attrs,
            resource_json,
            read,
            None if service is None else str(service),
            _Context.read(Attrs({}, attrs, out.warn, out.ignore)),
            SPAN_BYTES + ATTRIBUTE_BYTES * len(read) + RESOURCE_COPIES * len(resource_json),
            C.VLLM_RESOURCE_MARK in attrs,
        )
        for scope_name, scope_version, scope_attrs, spans in scopes:
            over = scope_attrs - limit  # never read nor stored: only counted
            if over > 0:
                cuts.attributes += over
            names = (scope_name, scope_version)
            for span in spans:
                p = _parse(out, rules, cuts, span, names, res)
                if p is not None:
                    parsed.append(p)
    _build(out, rules, parsed)
    out.dropped_attributes, out.dropped_events, out.truncated_values = cuts.attributes, cuts.events, cuts.values
    if cuts.attributes or cuts.events or cuts.values:  # one message, first: the same whichever decoder cut
        out.messages.insert(0, _cut_message(cuts))
        del out.messages[_MAX_MESSAGES:]
    return out


def _cut_message(cuts: Cuts) -> str:
    what = [f"{n} {name}" for n, name in ((cuts.attributes, "attributes"), (cuts.events, "span events")) if n]
    said = f"{' and '.join(what)} dropped over the collector's count limits" if what else ""
    if cuts.values:
        said += f"{'; ' if said else ''}{cuts.values} attribute values truncated"
    return f"{said} (their spans are stored, with the names the collector reads)"


def _parse(
    out: NormalizedBatch,
    rules: NormalizeRules,
    cuts: Cuts,
    span: tuple[Any, ...],
    scope: tuple[str, str],
    res: _Resource,
) -> _Parsed | None:
    """The span's record (into ``out``) and what building its call, tool call or task needs; None (and a rejection)
    for a span no record can be made of."""
    (trace_id, span_id, parent_id, name, kind, start_ns, end_ns, span_attrs, dropped_attributes,
     events, raw_events, dropped_events, status_code, status_message) = span  # fmt: skip
    if trace_id is None or span_id is None:
        out.reject(f"span {name[:100]!r}: trace_id must be 16 bytes and span_id 8 bytes, not all zero")
        return None
    if parent_id is False:
        out.reject(f"span {name!r}: parent_span_id must be 8 bytes")
        return None
    if not (0 < start_ns < _MAX_NS and 0 < end_ns < _MAX_NS):
        out.reject(f"span {name[:100]!r}: start and end time must be set, in nanoseconds since 1970")
        return None
    if end_ns < start_ns:  # a clock that went backwards: kept, as a span of no duration
        out.warn(f"span {name[:100]!r}: end before start by {start_ns - end_ns} ns; end set to start")
        end_ns = start_ns
    if type(span_attrs) is not dict:  # over the count limit
        span_attrs = cut_attributes(span_attrs, cuts.max_attributes, cuts)
        dropped_attributes = dropped_count(dropped_attributes, cuts.pending)
    cost = res.cost + ATTRIBUTE_BYTES * len(span_attrs)
    if raw_events:
        events, over = cut_events(events, cuts)
        if over:
            dropped_events = dropped_count(dropped_events, over)
    if events:
        cost += EVENT_BYTES * len(events) + ATTRIBUTE_BYTES * sum(len(e["attributes"]) for e in events)
    spent = cuts.spent = cuts.spent + cost
    if spent > cuts.budget:
        cuts.over()
    scope_name, scope_version = scope
    out.spans.append(
        SpanRecord(  # positional, in its field order (pinned by a test)
            trace_id,
            span_id,
            parent_id,
            name,
            kind if 0 <= kind <= _MAX_KIND else 0,  # unknown enum values: unspecified
            start_ns,
            end_ns,
            status_code if 0 <= status_code <= _MAX_STATUS else 0,
            status_message,
            res.service,
            scope_name,
            scope_version,
            compact_sorted(span_attrs),
            res.json,
            compact_sorted(events) if events else "[]",
            dropped_attributes,
            dropped_events,
        )
    )
    a = Attrs(span_attrs, res.attributes, out.warn, out.ignore, res.read)
    shared = res.shared if _CONTEXT_NAMES.isdisjoint(span_attrs) else None
    if is_engine_span(scope_name, span_attrs, res.vllm):
        # an engine's own server span: an engine-span record, never an LLM call (its client's span is the call)
        ctx = shared if shared is not None else _Context.read(a)
        out.engine_spans.append(
            engine_span(a, trace_id, span_id, parent_id, (start_ns, end_ns), ctx.engine, ctx.cluster_id, res.service)
        )
        return None
    op = a.get(C.OPERATION)  # nearly always the OTel name: the other conventions only when it is missing
    if type(op) is not str or not op:
        op = X.operation(a)
    task_names = rules.task_id_attributes
    own_task_id = a.get(task_names[0]) if task_names else None
    if type(own_task_id) is not str or not own_task_id:
        own_task_id = a.text(*task_names) if task_names else None
    return _Parsed(
        name,
        events,
        trace_id,
        span_id,
        parent_id,
        start_ns,
        end_ns,
        status_code == _ERROR,
        scope_name,
        a,
        res.service,
        op,
        X.role(span_attrs, op),
        own_task_id,
        shared,
        (trace_id, span_id),
    )


class _TaskIds:
    """A span's task id: its own (first configured attribute), else its nearest ancestor's in this request."""

    def __init__(self, parsed: list[_Parsed]) -> None:
        self.index = {p.key: p for p in parsed}
        self.memo: dict[tuple[str, str], str | None] = {}

    def inherited(self, p: _Parsed) -> str | None:
        path: list[tuple[str, str]] = []
        cur: _Parsed | None = p
        found: str | None = None
        for _ in range(_MAX_DEPTH):
            if cur is None:
                break
            key = cur.key
            if key in self.memo:
                found = self.memo[key]
                break
            path.append(key)
            if cur.own_task_id is not None:
                found = cur.own_task_id
                break
            cur = self.index.get((cur.trace_id, cur.parent_id)) if cur.parent_id else None
        for key in path:
            self.memo[key] = found
        return found


def _status(p: _Parsed) -> tuple[str, str | None]:
    a = p.attrs
    status = "error" if p.failed else "ok"
    error_type = a.text(*C.ERROR_TYPE) if status == "error" or N.ERROR_TYPE in a.span else None
    if error_type is None and status == "error":
        error_type = X.error_type_from_events(p.events)
    if error_type is not None:
        status = "error"
    return status, error_type


def _outcome(a: Attrs, rules: NormalizeRules, status: str) -> str:
    outcome = a.text(N.TASK_OUTCOME)
    if outcome in N.OUTCOMES:
        return outcome
    if rules.outcome_attribute:
        mapped = rules.outcome_from(a.get(rules.outcome_attribute))
        if mapped is not None:
            return mapped
    return "failed" if status == "error" else "completed"


def _is_task_root(p: _Parsed, explicit_task_traces: set[str], genai_traces: set[str]) -> bool:
    """A trace root that stands for a task although no span says `taskcost.task.kind` (foreign instrumentation)."""
    if p.parent_id is not None or p.role == "task" or p.trace_id in explicit_task_traces:
        return False
    if N.CALL_ID in p.attrs.span:
        return False  # the taskcost SDK's call outside any task: SDK users mark their tasks themselves
    return (
        p.role in ("llm", "tool")
        or p.op in C.TASK_MARKER_OPERATIONS
        or p.own_task_id is not None
        or p.trace_id in genai_traces
    )


def _build(out: NormalizedBatch, rules: NormalizeRules, parsed: list[_Parsed]) -> None:
    ids = _TaskIds(parsed)
    explicit_task_traces = {p.trace_id for p in parsed if p.role == "task"}
    genai_traces = {p.trace_id for p in parsed if p.role in ("llm", "tool")}
    candidates: list[Candidate] = []
    contexts: dict[tuple[Any, ...], _Context] = {}
    for p in parsed:
        implicit = rules.implicit_tasks and _is_task_root(p, explicit_task_traces, genai_traces)
        if p.role is None and not implicit:
            continue
        rule_id = ids.inherited(p)
        task_id = rule_id or f"trace:{p.trace_id}"
        status, error_type = _status(p)
        if p.role == "llm":
            ctx = _context(p, out, contexts)
            record, usage = _llm_call(p, ctx, task_id, status, error_type, rules.pricing_attributes)
            sdk = N.CALL_ID in p.attrs.span or N.TASK_ID in p.attrs.span
            candidates.append(Candidate(record, p.parent_id, p.scope_name, usage, sdk, rule_id is not None))
        elif p.role == "tool":
            out.tool_calls.append(_tool_call(p, task_id, status, error_type))
        if p.role == "task" or implicit:
            ctx = _context(p, out, contexts)
            out.tasks.append(_task(p, ctx, rules, task_id, status, error_type, explicit=p.role == "task"))
    if rules.fold_duplicates:
        parents = {p.key: p.parent_id for p in parsed}
        out.llm_calls.extend(fold_calls(candidates, parents))
    else:
        out.llm_calls.extend(c.record for c in candidates)
    for call in out.llm_calls:
        detail = call.engine_detail
        if detail is not None:  # keyed by the call it describes (a folded call keeps its first span's key)
            if detail.span_id != call.span_id:
                detail = dataclasses.replace(detail, trace_id=call.trace_id, span_id=call.span_id)
            out.call_engines.append(detail)


def _tool_call(p: _Parsed, task_id: str, status: str, error_type: str | None) -> ToolCallRecord:
    return ToolCallRecord(
        trace_id=p.trace_id,
        span_id=p.span_id,
        task_id=task_id,
        tool_name=X.tool_name(p.attrs),
        start_ns=p.start_ns,
        end_ns=p.end_ns,
        status=status,
        error_type=error_type,
        cost_usd=to_money(p.attrs.span.get(N.TOOL_COST), p.attrs.ignore, N.TOOL_COST),
        service_name=p.service,
    )


def _task(
    p: _Parsed,
    ctx: _Context,
    rules: NormalizeRules,
    task_id: str,
    status: str,
    error_type: str | None,
    *,
    explicit: bool,
) -> TaskRecord:
    a = p.attrs
    kind = a.text(N.TASK_KIND) if explicit else (a.text(*C.WORKFLOW_NAME) or X.agent_name(a) or p.name or None)
    return TaskRecord(
        trace_id=p.trace_id,
        span_id=p.span_id,
        task_id=task_id,
        kind=kind,
        outcome=_outcome(a, rules, status),
        start_ns=p.start_ns,
        end_ns=p.end_ns,
        status=status,
        error_type=error_type,
        harness_version=ctx.harness_version,
        agent_name=X.agent_name(a),
        agent_version=ctx.agent_version,
        conversation_id=a.text(*C.CONVERSATION_ID),
        service_name=p.service,
        golden=a.flag(N.TASK_GOLDEN),
    )


def _prompt_fingerprint(a: Attrs) -> tuple[int | None, int | None, int | None, str | None]:
    """(prompt characters, stable prefix characters, index and kind of the block that broke the prefix), from the
    SDK's fingerprint attributes; a value that is not what the SDK sends is skipped (counted with a reason)."""
    chars = a.get(N.PROMPT_BLOCK_CHARS)
    total = None
    if isinstance(chars, list) and chars and all(type(c) is int and 0 <= c <= MAX_TOKENS for c in chars):
        total = sum(chars)
    stable = a.integer(N.PROMPT_STABLE_PREFIX_CHARS)
    block = a.integer(N.PROMPT_PREFIX_BREAK_BLOCK, limit=_MAX_ATTEMPT)
    kinds = a.get(N.PROMPT_BLOCK_KINDS)
    kind = None
    if block is not None and isinstance(kinds, list) and block < len(kinds) and isinstance(kinds[block], str):
        kind = kinds[block][:64] or None
    return total, stable, block, kind


def _llm_call(
    p: _Parsed, ctx: _Context, task_id: str, status: str, error_type: str | None, pricing_names: tuple[str, ...]
) -> tuple[LLMCallRecord, X.Usage]:
    """The call's record, and its token counts (the record's) for folding.

    Each field is read at the one name its key table (``_plan``) chose for spans of this shape: a value of the usual
    type is taken as it is; any other, and a field whose name is missing here, goes to the general reader (``Attrs``,
    ``_extract``), which tries every name in precedence order and gives a skipped value its reason."""
    a = p.attrs
    get = cast("Callable[[str | None], Any]", a.merged.get)  # a name the key table found missing is None
    plan = call_plan(tuple(a.merged), pricing_names)
    (k_in, k_out, k_read, k_write, k_reason, k_total, k_att, k_call,
     k_prov, k_req, k_resp, k_rid, k_ttft, k_srv, k_conv, k_agent) = plan.keys  # fmt: skip
    # token counts: an int in [0, MAX_TOKENS] at the chosen name is the count
    inp, out, read, write = get(k_in), get(k_out), get(k_read), get(k_write)
    if type(inp) is not int or not 0 <= inp <= MAX_TOKENS:
        inp = a.integer(*C.INPUT_TOKENS) if k_in else None
    if type(out) is not int or not 0 <= out <= MAX_TOKENS:
        out = a.integer(*C.OUTPUT_TOKENS) if k_out else None
    if type(read) is not int or not 0 <= read <= MAX_TOKENS:
        read = a.integer(*C.CACHE_READ_TOKENS) if k_read else None
    if type(write) is not int or not 0 <= write <= MAX_TOKENS:
        write = a.integer(*C.CACHE_WRITE_TOKENS) if k_write else None
    reasoning = a.integer(*C.REASONING_TOKENS) if k_reason else None
    total = a.integer(*C.TOTAL_TOKENS) if k_total else None
    usage = X.usage_of(a, inp, out, read, write, reasoning, total)
    attempt = get(k_att)
    if type(attempt) is not int or not 0 <= attempt <= _MAX_ATTEMPT:
        attempt = a.integer(N.CALL_ATTEMPT, limit=_MAX_ATTEMPT) if k_att else None
    # text: a non-empty string at the chosen name is the value
    call_id, raw_provider, request_model, response_model = get(k_call), get(k_prov), get(k_req), get(k_resp)
    if type(call_id) is not str or not call_id:
        call_id = a.text(N.CALL_ID) if k_call else None
    if type(raw_provider) is not str or not raw_provider:
        raw_provider = a.text(*C.PROVIDER) if k_prov else None
    if type(request_model) is not str or not request_model:
        request_model = a.text(*C.REQUEST_MODEL) if k_req else None
    if type(response_model) is not str or not response_model:
        response_model = a.text(*C.RESPONSE_MODEL) if k_resp else None
    rid, server, conversation, agent = get(k_rid), get(k_srv), get(k_conv), get(k_agent)
    if type(rid) is not str or not rid:
        rid = X.response_id(a) if k_rid or plan.output_value else None
    if type(server) is not str or not server:
        server = X.server_address(a) if k_srv or plan.api_base else None
    if type(conversation) is not str or not conversation:
        conversation = a.text(*C.CONVERSATION_ID) if k_conv else None
    if type(agent) is not str or not agent:
        agent = X.agent_name(a) if k_agent or plan.traceloop_kind else None
    ttft = get(k_ttft)
    if type(ttft) is not float or not 0.0 <= ttft < _INF:
        ttft = X.ttft(a, p.start_ns, p.events) if k_ttft or plan.ttft_flags or p.events else None
    pricing = {
        name: value
        for name in plan.pricing
        if (raw := get(name)) is not None and (value := pricing_value(raw, a.ignore, name)) is not None
    }
    deployment = ctx.deployment
    # positional (in LLMCallRecord's field order, pinned by a test): 43 keyword arguments cost several times more
    record = LLMCallRecord(
        p.trace_id,
        p.span_id,
        task_id,
        call_id or p.span_id,
        attempt if attempt and attempt >= 1 else 1,
        p.start_ns,
        p.end_ns,
        p.op or "chat",  # operation
        X.provider_id(raw_provider),
        request_model,
        response_model,
        rid,  # response_id
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
        ttft,  # ttft_s
        status,
        error_type,
        server,  # server_address
        p.service,  # service_name
        conversation,  # conversation_id
        agent,  # agent_name
        ctx.agent_version,
        ctx.harness_version,
        ctx.engine,
        ctx.engine_version,
        ctx.quantization,
        ctx.gpu_type,
        ctx.gpu_count,
        ctx.cluster_id,
        deployment if deployment in N.DEPLOYMENTS else None,
        ctx.image_name,  # container_image_name
        ctx.image_tags,  # container_image_tags
        ctx.k8s_cluster,  # k8s_cluster_name
        ctx.cloud_region,
        pricing or None,  # pricing_attributes
        None,  # prompt_chars .. prefix_break_kind: set below when the span has a fingerprint
        None,
        None,
        None,
        call_engine(a, p.trace_id, p.span_id, ctx.topology) if plan.timings or ctx.topology is not None else None,
    )
    if plan.prompt:
        (record.prompt_chars, record.stable_prefix_chars, record.prefix_break_block, record.prefix_break_kind) = (
            _prompt_fingerprint(a)
        )
    return record, usage
