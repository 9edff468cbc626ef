"""What a re-price did, and what a cluster cost: plain records, JSON-safe both ways (the HTTP API sends them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["ClusterWindowCost", "ModelChange", "RepriceReport"]


def _dump(obj: Any) -> Any:
    if isinstance(obj, Decimal):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _dump(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [_dump(x) for x in obj]
    return obj


def _money_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if "Decimal" in str(f.type)}


@dataclass
class ModelChange:
    """The calls of one model whose cost changed, and their total before and after."""

    provider: str | None
    model: str | None
    calls: int = 0
    before_usd: Decimal = Decimal(0)
    after_usd: Decimal = Decimal(0)


@dataclass
class RepriceReport:
    """What ``taskcost reprice`` examined and changed. Totals count priced calls only (unpriced are NULL)."""

    since_ns: int | None = None
    until_ns: int | None = None
    dry_run: bool = False
    prices: str = ""
    book: str | None = None
    clusters: str | None = None
    calls: int = 0
    changed: int = 0  # calls whose cost changed (or that became priced or unpriced)
    updated: int = 0  # calls whose stored price columns changed at all (provenance included)
    newly_priced: int = 0
    newly_unpriced: int = 0
    unpriced_after: int = 0
    before_usd: Decimal = Decimal(0)
    after_usd: Decimal = Decimal(0)
    by_model: list[ModelChange] = field(default_factory=list)
    tool_calls: int = 0
    tools_changed: int = 0
    tool_before_usd: Decimal = Decimal(0)
    tool_after_usd: Decimal = Decimal(0)
    self_hosted_calls: int = 0
    self_hosted_changed: int = 0
    windows: int = 0
    bill_usd: Decimal = Decimal(0)
    attributed_usd: Decimal = Decimal(0)
    idle_usd: Decimal = Decimal(0)
    caught_up: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _dump(self)
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RepriceReport:
        money = _money_fields(cls)
        values: dict[str, Any] = {k: (Decimal(v) if k in money else v) for k, v in doc.items() if k != "by_model"}
        changes = [
            ModelChange(m["provider"], m["model"], int(m["calls"]), Decimal(m["before_usd"]), Decimal(m["after_usd"]))
            for m in doc.get("by_model", [])
        ]
        return cls(**values, by_model=changes)


@dataclass
class ClusterWindowCost:
    """One self-hosted cluster's bill over one window: ``attributed_usd + idle_usd == bill_usd``."""

    cluster_id: str
    window_start_ns: int
    window_end_ns: int
    gpu_type: str | None
    gpu_count: int
    usd_per_gpu_hour: Decimal
    rate_source: str
    bill_usd: Decimal
    attributed_usd: Decimal
    idle_usd: Decimal
    busy_s: float
    calls: int
    clusters_version: str

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _dump(self)
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ClusterWindowCost:
        money = _money_fields(cls)
        values: dict[str, Any] = {k: (Decimal(v) if k in money else v) for k, v in doc.items()}
        return cls(**values)
