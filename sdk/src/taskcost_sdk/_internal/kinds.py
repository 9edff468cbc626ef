"""Typed keyword arguments and literals shared by the public API."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from .retry import CallRef
    from .spans import LLMCall

__all__ = ["InfraOverrides", "Outcome", "RecordOptions"]

Outcome = Literal["completed", "failed", "abandoned"]


class InfraOverrides(TypedDict, total=False):
    """Per-call infra tags; each becomes a span attribute that overrides the resource default."""

    engine: str
    engine_version: str
    quantization: str
    gpu_type: str
    gpu_count: int
    cluster_id: str
    deployment: Literal["api", "self_hosted"]
    parallel_tensor: int
    parallel_pipeline: int
    parallel_data: int
    pd_disaggregated: bool
    pd_prefill_gpu_type: str
    pd_decode_gpu_type: str
    spec_method: str
    spec_draft_model: str
    server_address: str
    container_image_name: str
    container_image_tags: Sequence[str]
    k8s_cluster_name: str
    cloud_region: str
    harness_version: str


class RecordOptions(InfraOverrides, total=False):
    """Keyword arguments of record_llm_call() other than ``task``."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    ttft_s: float | None
    call_id: str | None
    attempt: int | None
    retry_of: LLMCall | CallRef | None
    error_type: str | None
    response_model: str | None
    response_id: str | None
    start_time: datetime | int | None
    end_time: datetime | int | None
    duration_s: float | None
