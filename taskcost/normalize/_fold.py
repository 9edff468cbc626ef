"""One provider response counts once: fold the spans that describe the same LLM call.

Client libraries now emit their own GenAI span beside an instrumentation's span for the same call (the `anthropic`
client does as soon as a global TracerProvider exists), instrumentations stack (LangChain's and OpenAI's
OpenInference spans), and the taskcost SDK's `llm_call` may wrap an instrumented call. Summing every span with usage
would count such a call two or three times. Within one export request, these LLM spans are one call:

1. the same span twice (same trace and span id);
2. the same `gen_ai.response.id` in one trace;
3. an LLM span and its nearest LLM ancestor, when their usage agrees (or one of them reports none) and their
   response ids do not differ. An LLM span above two or more distinct calls is a wrapper: it is dropped when it
   reports no usage or exactly their sum, and kept otherwise;
4. sibling LLM spans (same parent) from different instrumentation scopes that overlap in time and report the same
   usage and model, with no conflicting response ids. Two spans of one scope are never folded this way: parallel
   identical calls from one instrumentation stay two calls.

The folded call keeps the richer attributes: token counts, models, response id and TTFT come first from the span
with the most complete usage (ties: the shortest span, the one nearest the HTTP request); task, call id, attempt and
context come first from a span the taskcost SDK wrote. It is an error if any of the spans says so.

Spans of one call that arrive in different export requests are not folded here (the normaliser sees one request).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from taskcost.normalize._extract import Usage
from taskcost.normalize._records import LLMCallRecord

__all__ = ["Candidate", "fold_calls"]

_MEASURED = (
    "provider",
    "request_model",
    "response_model",
    "response_id",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "ttft_s",
    "server_address",
)
_CONTEXT = (
    "conversation_id",
    "agent_name",
    "agent_version",
    "harness_version",
    "engine",
    "engine_version",
    "quantization",
    "gpu_type",
    "gpu_count",
    "cluster_id",
    "deployment",
    "container_image_name",
    "container_image_tags",
    "k8s_cluster_name",
    "cloud_region",
    "service_name",
    "error_type",
    "engine_detail",
)
_MAX_DEPTH = 256


@dataclass(slots=True)
class Candidate:
    record: LLMCallRecord
    parent_span_id: str | None
    scope: str
    usage: Usage
    sdk: bool  # the span carries taskcost.call.id / taskcost.task.id: the agent's own account of the call
    task_from_rule: bool  # its task id came from an attribute (its own or an ancestor's), not the trace fallback

    @property
    def key(self) -> tuple[str, str]:
        return (self.record.trace_id, self.record.span_id)

    def measure_order(self) -> tuple[int, int, int, str]:
        u = self.usage
        fields = sum(
            v is not None
            for v in (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens)
        )
        r = self.record
        return (0 if u.present else 1, -fields, r.end_ns - r.start_ns, r.span_id)

    def identity_order(self) -> tuple[int, int, tuple[int, int, int, str]]:
        return (0 if self.sdk else 1, 0 if self.task_from_rule else 1, self.measure_order())


class _Groups:
    def __init__(self, cands: list[Candidate]) -> None:
        self.cands = cands
        self.parent = list(range(len(cands)))
        self.scopes: list[set[str]] = [{c.scope} for c in cands]
        self.members: list[list[int]] = [[i] for i in range(len(cands))]
        self.unions = 0  # groups joined: none, and every candidate is its own call

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            if len(self.members[a]) < len(self.members[b]):
                a, b = b, a
            self.parent[b] = a
            self.unions += 1
            self.scopes[a] |= self.scopes[b]
            self.members[a].extend(self.members[b])
            self.members[b] = []

    def of(self, i: int) -> list[Candidate]:
        """The candidates in i's group."""
        return [self.cands[m] for m in self.members[self.find(i)]]


def _rids_agree(a: Candidate, members: list[Candidate]) -> bool:
    rid = a.record.response_id
    return rid is None or all(m.record.response_id in (None, rid) for m in members)


def _usage_agrees(a: Candidate, members: list[Candidate]) -> bool:
    if not a.usage.present:
        return True
    with_usage = [m for m in members if m.usage.present]
    return not with_usage or any(m.usage.key == a.usage.key for m in with_usage)


def _group_usage(members: list[Candidate]) -> Usage:
    best = min(members, key=Candidate.measure_order)
    return best.usage


def _same_model(a: LLMCallRecord, b: LLMCallRecord) -> bool:
    if a.provider and b.provider and a.provider != b.provider:
        return False
    if a.response_model and b.response_model:
        return a.response_model == b.response_model
    if a.request_model and b.request_model:
        return a.request_model == b.request_model
    return True


def fold_calls(cands: list[Candidate], span_parents: Mapping[tuple[str, str], str | None]) -> list[LLMCallRecord]:
    """The calls of one request with the spans of each provider response folded into one record."""
    if len(cands) < 2:
        return [c.record for c in cands]
    g = _Groups(cands)
    index: dict[tuple[str, str], int] = {}
    by_response: dict[tuple[str, str], int] = {}
    for i, c in enumerate(cands):
        first = index.setdefault(c.key, i)
        if first != i:
            g.union(first, i)  # the same span twice in one request
        if c.record.response_id:
            g.union(by_response.setdefault((c.record.trace_id, c.record.response_id), i), i)

    dropped = _fold_nested(cands, g, index, span_parents)
    if len({c.scope for c in cands}) > 1:  # rule 4 folds spans of different scopes only
        _fold_siblings(cands, g, dropped)
    if not g.unions and not dropped:  # the common case: every span its own call
        return [c.record for c in cands]

    out: list[LLMCallRecord] = []
    emitted: set[int] = set()
    for i in range(len(cands)):  # in the request's order
        root = g.find(i)
        if root in emitted:
            continue
        emitted.add(root)
        members = [cands[m] for m in sorted(g.members[root]) if m not in dropped]
        if members:
            out.append(_merge(members))
    return out


def _fold_nested(
    cands: list[Candidate],
    g: _Groups,
    index: Mapping[tuple[str, str], int],
    span_parents: Mapping[tuple[str, str], str | None],
) -> set[int]:
    nearest: dict[int, int] = {}
    for i, c in enumerate(cands):
        trace, parent = c.record.trace_id, c.parent_span_id
        for _ in range(_MAX_DEPTH):
            if parent is None:
                break
            key = (trace, parent)
            if key in index and index[key] != i:
                nearest[i] = index[key]
                break
            if key not in span_parents:
                break
            parent = span_parents[key]
    kids: dict[int, list[int]] = defaultdict(list)
    for child, anc in nearest.items():
        kids[anc].append(child)

    def depth(i: int) -> int:
        d = 0
        while i in nearest and d < _MAX_DEPTH:
            i, d = nearest[i], d + 1
        return d

    dropped: set[int] = set()
    for anc in sorted(kids, key=depth, reverse=True):  # innermost wrappers first
        own = g.find(anc)
        child_groups = {g.find(k) for k in kids[anc] if k not in dropped} - {own}
        if not child_groups:
            continue
        a = cands[anc]
        if len(child_groups) == 1:
            root = next(iter(child_groups))
            members = g.of(root)
            if _rids_agree(a, members) and _usage_agrees(a, members):
                g.union(own, root)
            continue
        if len(g.of(own)) > 1:
            continue
        sums = [_group_usage(g.of(r)) for r in child_groups]
        total = (
            sum(u.input_tokens or 0 for u in sums),
            sum(u.output_tokens or 0 for u in sums),
        )
        if not a.usage.present or a.usage.key == total:
            dropped.add(anc)  # a wrapper around several calls: its usage is theirs, or it has none
    return dropped


def _fold_siblings(cands: list[Candidate], g: _Groups, dropped: set[int]) -> None:
    buckets: dict[tuple[str, str | None], list[int]] = defaultdict(list)
    for i, c in enumerate(cands):
        if i not in dropped and c.usage.present:
            buckets[(c.record.trace_id, c.parent_span_id)].append(i)
    for members in buckets.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: cands[i].record.start_ns)
        for x, i in enumerate(members):
            a = cands[i].record
            for j in members[x + 1 :]:
                b = cands[j].record
                if b.start_ns >= a.end_ns:
                    break  # sorted by start: nothing later overlaps a
                gi, gj = g.find(i), g.find(j)
                if gi == gj or g.scopes[gi] & g.scopes[gj]:
                    continue
                if cands[i].usage.key != cands[j].usage.key or not _same_model(a, b):
                    continue
                if a.response_id and b.response_id and a.response_id != b.response_id:
                    continue
                g.union(gi, gj)


def _merge(members: list[Candidate]) -> LLMCallRecord:
    if len(members) == 1:
        return members[0].record
    measured = sorted(members, key=Candidate.measure_order)
    identity = sorted(members, key=Candidate.identity_order)
    first = identity[0].record
    changes: dict[str, Any] = {}
    for name in _MEASURED:
        changes[name] = next((v for c in measured if (v := getattr(c.record, name)) is not None), None)
    for name in _CONTEXT:
        changes[name] = next((v for c in identity if (v := getattr(c.record, name)) is not None), None)
    changes["task_id"] = next((c.record.task_id for c in identity if c.task_from_rule), first.task_id)
    if any(c.record.status == "error" for c in members):
        changes["status"] = "error"
    return dataclasses.replace(first, **changes)
