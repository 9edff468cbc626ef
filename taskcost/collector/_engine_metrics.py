"""Inference engines' own metrics -> canonical samples (the ``engine_metrics`` view, docs/schema.md).

Two ways in, one table of names:

- Prometheus text from an engine's ``/metrics`` (vLLM, SGLang, llama.cpp server), parsed by prometheus-client's
  parser (``text_string_to_metric_families``): ``samples_from_text``;
- OTLP metrics (``ExportMetricsServiceRequest``) from an OpenTelemetry Collector that scraped the engine:
  ``samples_from_otlp``. Its prometheus receiver names a counter ``vllm:x_total`` as a monotonic Sum ``vllm:x``; a
  histogram ``h`` as a Histogram whose points carry ``h_sum`` and ``h_count``. Both spellings are looked up.

Only the names of ``MAPPING`` are kept, with only the labels of ``LABELS`` (bounded cardinality); everything else an
engine exports is left out without a word. A value that cannot be a sample (not a number, not finite, a negative
counter, a delta sum, no timestamp) costs that one data point: it is counted and named in ``Parsed.messages``.
``SeriesLimit`` caps the distinct series a project may have; samples of series past the cap are dropped and counted.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError as _PbDecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from taskcost._internal.compact_json import compact_sorted
from taskcost.normalize import Cuts, DecodeError, IntakeLimits

__all__ = [
    "ENGINES",
    "LABELS",
    "MAPPING",
    "TABLE",
    "EngineSample",
    "Parsed",
    "SeriesLimit",
    "decode_metrics_request",
    "engine_rows",
    "samples_from_otlp",
    "samples_from_text",
]

TABLE = "engine_metric_rows"  # the store's batch table (docs/schema.md, ``engine_metrics``)
ENGINES = ("vllm", "sglang", "llamacpp")
_MAX_MESSAGES = 5
_INT64_MAX = 2**63 - 1
# a llama.cpp counter that is not a canonical name on its own: prompt tokens *not* taken from the cache
_UNCACHED = "_uncached_prompt_tokens"


@dataclass(frozen=True, slots=True)
class _Name:
    metric: str  # the canonical name
    kind: str  # 'counter' | 'gauge'
    rank: int = 0  # when two source names give the same sample, the lower rank is kept (deprecated aliases: 1)


def _c(metric: str, rank: int = 0) -> _Name:
    return _Name(metric, "counter", rank)


def _g(metric: str, rank: int = 0) -> _Name:
    return _Name(metric, "gauge", rank)


def _hist(source: str, canonical: str) -> dict[str, _Name]:
    """A latency histogram's ``_sum`` and ``_count``, kept as two counters."""
    return {f"{source}_sum": _c(f"{canonical}_sum"), f"{source}_count": _c(f"{canonical}_count")}


# The engines' sample names as they appear in their Prometheus exposition (counters with ``_total``) -> canonical.
MAPPING: dict[str, _Name] = {
    # vLLM (V1 engine; labels model_name, engine)
    "vllm:prompt_tokens_total": _c("prompt_tokens"),
    "vllm:generation_tokens_total": _c("generation_tokens"),
    "vllm:prefix_cache_queries_total": _c("prefix_cache_queries"),
    "vllm:gpu_prefix_cache_queries_total": _c("prefix_cache_queries", 1),
    "vllm:prefix_cache_hits_total": _c("prefix_cache_hits"),
    "vllm:gpu_prefix_cache_hits_total": _c("prefix_cache_hits", 1),
    "vllm:spec_decode_num_drafts_total": _c("spec_drafts"),
    "vllm:spec_decode_num_draft_tokens_total": _c("spec_draft_tokens"),
    "vllm:spec_decode_num_accepted_tokens_total": _c("spec_accepted_tokens"),
    "vllm:spec_decode_num_accepted_tokens_per_pos_total": _c("spec_accepted_tokens"),
    "vllm:num_requests_running": _g("requests_running"),
    "vllm:num_requests_waiting": _g("requests_waiting"),
    "vllm:kv_cache_usage_perc": _g("kv_cache_usage"),
    "vllm:gpu_cache_usage_perc": _g("kv_cache_usage", 1),
    "vllm:num_preemptions_total": _c("preemptions"),
    "vllm:request_success_total": _c("requests_finished"),
    **_hist("vllm:request_queue_time_seconds", "queue_seconds"),
    **_hist("vllm:request_prefill_time_seconds", "prefill_seconds"),
    **_hist("vllm:request_decode_time_seconds", "decode_seconds"),
    **_hist("vllm:time_to_first_token_seconds", "ttft_seconds"),
    **_hist("vllm:e2e_request_latency_seconds", "e2e_seconds"),
    # SGLang (python/sglang/srt/metrics/collector.py; label model_name)
    "sglang:prompt_tokens_total": _c("prompt_tokens"),
    "sglang:generation_tokens_total": _c("generation_tokens"),
    "sglang:cached_tokens_total": _c("cached_prompt_tokens"),
    "sglang:num_requests_total": _c("requests_finished"),
    "sglang:cache_hit_rate": _g("cache_hit_rate"),
    "sglang:spec_accept_length": _g("spec_accept_length"),
    "sglang:spec_accept_rate": _g("spec_accept_rate"),
    "sglang:num_running_reqs": _g("requests_running"),
    "sglang:num_queue_reqs": _g("requests_waiting"),
    "sglang:token_usage": _g("kv_cache_usage"),
    **_hist("sglang:queue_time_seconds", "queue_seconds"),
    **_hist("sglang:time_to_first_token_seconds", "ttft_seconds"),
    **_hist("sglang:e2e_request_latency_seconds", "e2e_seconds"),
    # llama.cpp server (--metrics). Its prompt_tokens_total excludes cached tokens: prompt_tokens is derived as
    # prompt_tokens_total + prompt_tokens_cached_total of the same scrape (``_derive``).
    "llamacpp:prompt_tokens_total": _c(_UNCACHED),
    "llamacpp:prompt_tokens_cached_total": _c("cached_prompt_tokens"),
    "llamacpp:tokens_predicted_total": _c("generation_tokens"),
    "llamacpp:prompt_seconds_total": _c("prompt_seconds"),
    "llamacpp:tokens_predicted_seconds_total": _c("decode_seconds"),
    "llamacpp:spec_decode_num_drafts_total": _c("spec_drafts"),
    "llamacpp:spec_decode_num_draft_tokens_total": _c("spec_draft_tokens"),
    "llamacpp:spec_decode_num_accepted_tokens_total": _c("spec_accepted_tokens"),
    "llamacpp:spec_decode_num_accepted_tokens_per_pos_total": _c("spec_accepted_tokens"),
    "llamacpp:requests_processing": _g("requests_running"),
    "llamacpp:requests_deferred": _g("requests_waiting"),
    "llamacpp:kv_cache_usage_ratio": _g("kv_cache_usage"),
}

# Labels kept (source label -> stored name): each has few values. vLLM's ``engine`` is its engine core's index (data
# parallel ranks), not the engine's name. ``model_name`` becomes the ``model`` column.
LABELS = {"position": "position", "finished_reason": "finished_reason", "engine": "engine_index"}
_ENGINE_LABEL_OF = {"engine": "vllm"}  # a label kept only for this engine's names
_MODEL_LABEL = "model_name"
# The resource attributes an OTLP request names its cluster and engine by, first found wins (docs/schema.md).
CLUSTER_ATTRIBUTES = ("taskcost.cluster.id", "k8s.cluster.name", "service.name")
ENGINE_ATTRIBUTE = "taskcost.engine.name"


@dataclass(frozen=True, slots=True)
class EngineSample:
    cluster_id: str
    engine: str
    model: str | None
    metric: str
    source_metric: str
    labels: str  # compact JSON, keys sorted: part of the series' identity
    kind: str
    ts_ns: int
    value: float

    @property
    def series(self) -> tuple[str, str, str | None, str, str]:
        return (self.cluster_id, self.engine, self.model, self.metric, self.labels)


@dataclass(slots=True)
class Parsed:
    """What one exposition or request gave: samples, and the data points refused (with why, the first few)."""

    samples: list[EngineSample] = field(default_factory=list)
    rejected: int = 0
    messages: list[str] = field(default_factory=list)
    ignored: int = 0  # data points of names not mapped (left out without a word)

    def reject(self, why: str) -> None:
        self.rejected += 1
        if len(self.messages) < _MAX_MESSAGES:
            self.messages.append(why)


@dataclass(frozen=True, slots=True)
class _Context:
    cluster_id: str
    engine: str | None  # None: the name's prefix says
    model: str | None  # when the sample has no model_name label


def _engine_of(name: str) -> str:
    return name.split(":", 1)[0]


def _labels(source: str, raw: Mapping[str, str]) -> str:
    engine = _engine_of(source)
    kept = {
        LABELS[k]: str(v)
        for k, v in raw.items()
        if k in LABELS and _ENGINE_LABEL_OF.get(k, engine) == engine and str(v) != ""
    }
    return compact_sorted(kept)


def _sample(
    out: Parsed, ctx: _Context, source: str, name: _Name, raw_labels: Mapping[str, str], ts_ns: int, value: Any
) -> tuple[EngineSample, int] | None:
    """One data point as a sample, or None (counted in ``out``) when it cannot be one."""
    where = f"{source}{{{', '.join(f'{k}={v}' for k, v in sorted(raw_labels.items()))}}}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        out.reject(f"{where}: no numeric value")
        return None
    value = float(value)
    if not math.isfinite(value):
        out.reject(f"{where}: value {value} is not finite")
        return None
    if name.kind == "counter" and value < 0:
        out.reject(f"{where}: counter value {value} is negative")
        return None
    if not 0 < ts_ns <= _INT64_MAX:
        out.reject(f"{where}: no usable timestamp ({ts_ns})")
        return None
    model = raw_labels.get(_MODEL_LABEL) or ctx.model
    sample = EngineSample(
        cluster_id=ctx.cluster_id,
        engine=ctx.engine or _engine_of(source),
        model=model,
        metric=name.metric,
        source_metric=source,
        labels=_labels(source, raw_labels),
        kind=name.kind,
        ts_ns=ts_ns,
        value=value,
    )
    return sample, name.rank


def _derive(found: Iterable[tuple[EngineSample, int]]) -> list[EngineSample]:
    """One sample per (series, time): the lowest rank wins (a deprecated alias gives way to its new name); llama.cpp's
    uncached prompt tokens become ``prompt_tokens`` with the cached ones of the same series and time."""
    best: dict[tuple[Any, ...], tuple[EngineSample, int]] = {}
    for sample, rank in found:
        key = (*sample.series, sample.ts_ns)
        have = best.get(key)
        if have is None or rank < have[1]:
            best[key] = (sample, rank)
    out = []
    for (cluster, engine, model, metric, labels, ts), (sample, _) in best.items():
        if metric != _UNCACHED:
            out.append(sample)
            continue
        cached = best.get((cluster, engine, model, "cached_prompt_tokens", labels, ts))
        if cached is None:  # an older llama.cpp without the cached count: all prompt tokens are not known
            continue
        out.append(
            EngineSample(
                cluster,
                engine,
                model,
                "prompt_tokens",
                f"{sample.source_metric}+{cached[0].source_metric}",
                labels,
                "counter",
                ts,
                sample.value + cached[0].value,
            )
        )
    return out


# -- Prometheus text ---------------------------------------------------------------------------------------------


def _blocks(text: str) -> Iterator[str]:
    """The exposition cut into one block per metric family (a new block at each ``# HELP``, or at a ``# TYPE`` that
    no ``# HELP`` of its name announced), so that a family the parser refuses costs only itself."""
    block: list[str] = []
    announced = None
    for line in text.splitlines():
        starts = False
        if line.startswith("# HELP "):
            starts, announced = True, line.split()[2] if len(line.split()) > 2 else None
        elif line.startswith("# TYPE "):
            parts = line.split()
            starts = len(parts) < 3 or parts[2] != announced
            announced = None
        if starts and block:
            yield "\n".join(block) + "\n"
            block = []
        block.append(line)
    if block:
        yield "\n".join(block) + "\n"


def _families(text: str, out: Parsed) -> Iterator[Any]:
    try:
        yield from list(text_string_to_metric_families(text))
        return
    except (ValueError, TypeError, IndexError):
        pass
    for block in _blocks(text):
        try:
            yield from list(text_string_to_metric_families(block))
        except (ValueError, TypeError, IndexError) as exc:
            first = next((ln for ln in block.splitlines() if ln and not ln.startswith("#")), block.splitlines()[0])
            out.reject(f"not Prometheus text ({exc}): {first[:120]!r}")


def samples_from_text(text: str, *, cluster_id: str, engine: str | None, model: str | None, scraped_ns: int) -> Parsed:
    """An engine's ``/metrics`` exposition as canonical samples, all at ``scraped_ns`` (engines write no
    timestamps). ``engine``: the engine column (None: the names' prefix); ``model``: for samples without a
    ``model_name`` label."""
    out = Parsed()
    ctx = _Context(cluster_id, engine, model)
    found = []
    for family in _families(text, out):
        for s in family.samples:
            name = MAPPING.get(s.name)
            if name is None:
                out.ignored += 1
                continue
            got = _sample(out, ctx, s.name, name, s.labels, scraped_ns, s.value)
            if got is not None:
                found.append(got)
    out.samples = _derive(found)
    return out


# -- OTLP metrics ------------------------------------------------------------------------------------------------


def _any_value(v: Any) -> str | None:
    which = v.WhichOneof("value")
    if which in ("string_value", "int_value", "bool_value", "double_value"):
        return str(getattr(v, which))
    return None


def _attributes(kvs: Iterable[Any]) -> dict[str, str]:
    out = {}
    for kv in kvs:
        value = _any_value(kv.value)
        if value is not None:
            out[kv.key] = value
    return out


def _context(resource: Mapping[str, str]) -> _Context | None:
    cluster = next((resource[a] for a in CLUSTER_ATTRIBUTES if resource.get(a)), None)
    if cluster is None:
        return None
    return _Context(cluster, resource.get(ENGINE_ATTRIBUTE) or None, None)


_NO_RECORDED_VALUE = 1  # DataPointFlags: a staleness marker (the series ended), not a value
_DELTA = 1  # AggregationTemporality


def _number(point: Any) -> Any:
    which = point.WhichOneof("value")
    return None if which is None else getattr(point, which)


def _lookup(name: str) -> tuple[str, _Name] | None:
    for source in (name, f"{name}_total"):
        if source in MAPPING:
            return source, MAPPING[source]
    return None


def _otlp_metric(out: Parsed, ctx: _Context | None, metric: Any, found: list[tuple[EngineSample, int]]) -> None:
    which = metric.WhichOneof("data")
    if which in ("gauge", "sum"):
        hit = _lookup(metric.name)
        points = getattr(metric, which).data_points
        if hit is None:
            out.ignored += len(points)
            return
        source, name = hit
        delta = which == "sum" and metric.sum.aggregation_temporality == _DELTA
        for p in points:
            if p.flags & _NO_RECORDED_VALUE:
                continue
            labels = _attributes(p.attributes)
            if ctx is None:
                out.reject(f"{source}: no cluster (set the resource attribute taskcost.cluster.id)")
            elif delta:
                out.reject(f"{source}: a delta sum (send cumulative temporality)")
            elif (got := _sample(out, ctx, source, name, labels, p.time_unix_nano, _number(p))) is not None:
                found.append(got)
    elif which in ("histogram", "exponential_histogram"):
        wanted = [(s, MAPPING[s], part) for part in ("sum", "count") if (s := f"{metric.name}_{part}") in MAPPING]
        points = getattr(metric, which).data_points
        if not wanted:
            out.ignored += len(points)
            return
        delta = getattr(metric, which).aggregation_temporality == _DELTA
        for p in points:
            if p.flags & _NO_RECORDED_VALUE:
                continue
            labels = _attributes(p.attributes)
            if ctx is None:
                out.reject(f"{metric.name}: no cluster (set the resource attribute taskcost.cluster.id)")
                continue
            if delta:
                out.reject(f"{metric.name}: a delta histogram (send cumulative temporality)")
                continue
            for source, name, part in wanted:
                if part == "sum" and not p.HasField("sum"):
                    continue
                got = _sample(out, ctx, source, name, labels, p.time_unix_nano, p.sum if part == "sum" else p.count)
                if got is not None:
                    found.append(got)
    elif which == "summary":
        out.ignored += len(metric.summary.data_points)


def _strip_exemplars(doc: Any) -> None:
    """Exemplars (trace ids in hex, which protobuf's JSON reader would take for base64) are not read: left out."""
    for rm in doc.get("resourceMetrics", []) if isinstance(doc, dict) else []:
        for sm in rm.get("scopeMetrics", []) if isinstance(rm, dict) else []:
            for m in sm.get("metrics", []) if isinstance(sm, dict) else []:
                for kind in m.values() if isinstance(m, dict) else []:
                    for p in kind.get("dataPoints", []) if isinstance(kind, dict) else []:
                        if isinstance(p, dict):
                            p.pop("exemplars", None)


def decode_metrics_request(body: bytes, *, protobuf: bool, limits: IntakeLimits | None = None) -> Any:
    """An OTLP ``ExportMetricsServiceRequest`` from its protobuf or JSON body; DecodeError when it is not one,
    DecodedTooLarge when it would decode into more than ``limits`` allow."""
    cuts = Cuts(limits) if limits is not None else None
    msg = ExportMetricsServiceRequest()
    if protobuf:
        if cuts is not None:
            cuts.check_protobuf(body)
        try:
            msg.ParseFromString(body)
        except (_PbDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError(f"body is not a valid protobuf ExportMetricsServiceRequest: {exc}") from None
        return msg
    if cuts is not None:
        cuts.check_json(body)
    try:
        doc = json.loads(body)
    except RecursionError:
        raise DecodeError("JSON is nested too deeply") from None
    except ValueError as exc:
        raise DecodeError(f"body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise DecodeError("body must be a JSON object (ExportMetricsServiceRequest)")
    _strip_exemplars(doc)
    try:
        json_format.ParseDict(doc, msg, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise DecodeError(f"JSON is not an OTLP ExportMetricsServiceRequest: {exc}") from None
    return msg


def samples_from_otlp(request: Any) -> Parsed:
    """An ``ExportMetricsServiceRequest``'s engine metrics as canonical samples (cluster and engine from each
    resource: ``CLUSTER_ATTRIBUTES``, ``ENGINE_ATTRIBUTE``)."""
    out = Parsed()
    found: list[tuple[EngineSample, int]] = []
    for rm in request.resource_metrics:
        ctx = _context(_attributes(rm.resource.attributes))
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                _otlp_metric(out, ctx, metric, found)
    out.samples = _derive(found)
    return out


# -- the cap and the rows ----------------------------------------------------------------------------------------


class SeriesLimit:
    """At most ``max_series`` distinct series (cluster, engine, model, metric, labels) per project, counted since this
    process started: a sample of a series past the cap is dropped (``admit`` says how many)."""

    def __init__(self, max_series: int) -> None:
        self.max_series = max_series
        self._seen: dict[str, set[tuple[Any, ...]]] = {}
        self._lock = threading.Lock()

    def admit(self, project: str, samples: list[EngineSample]) -> tuple[list[EngineSample], int]:
        kept = []
        with self._lock:
            seen = self._seen.setdefault(project, set())
            for s in samples:
                key = s.series
                if key in seen:
                    kept.append(s)
                elif len(seen) < self.max_series:
                    seen.add(key)
                    kept.append(s)
        return kept, len(samples) - len(kept)

    def series(self, project: str) -> int:
        with self._lock:
            return len(self._seen.get(project, ()))


def engine_rows(samples: list[EngineSample], *, project: str, source: str, received_ns: int) -> dict[str, list[Any]]:
    """The samples as the columns of the store's ``engine_metric_rows``."""
    n = len(samples)
    return {
        "project": [project] * n,
        "cluster_id": [s.cluster_id for s in samples],
        "engine": [s.engine for s in samples],
        "model": [s.model for s in samples],
        "metric": [s.metric for s in samples],
        "source_metric": [s.source_metric for s in samples],
        "labels": [s.labels for s in samples],
        "kind": [s.kind for s in samples],
        "ts_ns": [s.ts_ns for s in samples],
        "value": [s.value for s in samples],
        "source": [source] * n,
        "received_ns": [received_ns] * n,
    }
