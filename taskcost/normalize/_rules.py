"""The configurable part of normalising: how a foreign span finds its task, and how a task's outcome is read."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from taskcost.normalize import _conventions as C
from taskcost.normalize import _names as N
from taskcost.normalize._conventions import DEFAULT_TASK_ID_ATTRIBUTES
from taskcost.normalize._limits import IntakeLimits

__all__ = ["DEFAULT_RULES", "NormalizeRules"]


@dataclass(frozen=True, slots=True)
class NormalizeRules:
    """How to read task identity and outcome. The defaults are the documented rules (docs/conventions.md).

    - ``task_id_attributes``: a span's task id is the first of these attributes it (or its resource) carries; a span
      with none inherits the id of its nearest ancestor in the same request that has one; else ``trace:<trace id>``.
    - ``outcome_attribute`` / ``outcome_values``: besides ``taskcost.task.outcome``, read the task outcome from this
      attribute of the task span, mapping its values (compared as lower-case strings) to ``completed``, ``failed`` or
      ``abandoned``; a value not in the map falls through to the span status (``ERROR`` -> ``failed``).
    - ``implicit_tasks``: a trace root span of a trace with no ``taskcost.task.kind`` span becomes the task's record,
      so foreign traces get an outcome (only when the root is GenAI work; see docs/conventions.md).
    - ``fold_duplicates``: fold the spans of one provider response into one LLM call (see ``_fold``).
    - ``pricing_attributes``: the attributes an LLM call carries to pricing (``LLMCallRecord.pricing_attributes``),
      span over resource: the names the pricing settings map (``pricing_attributes``).
    - ``limits``: what one span, list of attributes, value and request may hold (``_limits``); its ``keep`` is set
      here to ``read_names``, the attribute names these rules read, which a list over its count keeps first.
    """

    task_id_attributes: tuple[str, ...] = DEFAULT_TASK_ID_ATTRIBUTES
    outcome_attribute: str | None = None
    outcome_values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    implicit_tasks: bool = True
    fold_duplicates: bool = True
    pricing_attributes: tuple[str, ...] = N.PRICING_ATTRIBUTES
    limits: IntakeLimits = IntakeLimits()
    read_names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = tuple(k.strip() for k in self.task_id_attributes if k and k.strip())
        object.__setattr__(self, "task_id_attributes", keys)
        values: dict[str, str] = {}
        for raw, outcome in dict(self.outcome_values).items():
            if outcome not in N.OUTCOMES:
                raise ValueError(f"outcome_values[{raw!r}] = {outcome!r}: must be one of {sorted(N.OUTCOMES)}")
            values[str(raw).strip().lower()] = outcome
        if values and not self.outcome_attribute:
            raise ValueError("outcome_values is set but outcome_attribute is not")
        object.__setattr__(self, "outcome_values", MappingProxyType(values))
        names = {v for k, v in vars(N).items() if k.isupper() and type(v) is str}  # taskcost's and OTel's names
        names.update(
            C.READ_NAMES, C.ENGINE_READ_NAMES, N.PRICING_ATTRIBUTES, self.task_id_attributes, self.pricing_attributes
        )
        names.update((C.EXCEPTION_TYPE, C.VLLM_RESOURCE_MARK))
        if self.outcome_attribute:
            names.add(self.outcome_attribute)
        object.__setattr__(self, "read_names", frozenset(names))
        object.__setattr__(self, "limits", dataclasses.replace(self.limits, keep=self.read_names))

    @classmethod
    def build(
        cls,
        *,
        task_id_attributes: Iterable[str] | None = None,
        outcome_attribute: str | None = None,
        outcome_values: Mapping[str, Any] | None = None,
        implicit_tasks: bool | None = None,
        fold_duplicates: bool | None = None,
        pricing_attributes: Iterable[str] | None = None,
        limits: IntakeLimits | None = None,
    ) -> NormalizeRules:
        """Rules from optional settings; ``None`` means the default."""
        given: dict[str, Any] = {}
        if task_id_attributes is not None:
            given["task_id_attributes"] = tuple(task_id_attributes)
        if outcome_attribute:
            given["outcome_attribute"] = outcome_attribute
        if outcome_values:
            given["outcome_values"] = {str(k): str(v) for k, v in outcome_values.items()}
        if implicit_tasks is not None:
            given["implicit_tasks"] = implicit_tasks
        if fold_duplicates is not None:
            given["fold_duplicates"] = fold_duplicates
        if pricing_attributes is not None:
            given["pricing_attributes"] = tuple(pricing_attributes)
        if limits is not None:
            given["limits"] = limits
        return cls(**given)

    def outcome_from(self, value: Any) -> str | None:
        """The outcome a value of ``outcome_attribute`` means, or None."""
        if value is None:
            return None
        key = (str(value).lower() if isinstance(value, bool) else str(value)).strip().lower()
        return self.outcome_values.get(key)


DEFAULT_RULES = NormalizeRules()
