"""The ``engines`` question in words: a configuration's label, the five variables and how two configurations differ in
them, the controlled pairs (two configurations that differ in one variable only), and the sentences of the summary.
Association, never causation: configurations that differ in several variables at once cannot say which one did it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from taskcost.analytics._engines_figures import Config
from taskcost.analytics._engines_sql import CONFIG
from taskcost.pricing import format_usd

__all__ = ["OTHER", "VARIABLES", "compare", "describe", "labels", "pairs", "speculation_sentence", "spread"]

VARIABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "hardware": ("hardware & topology", ("gpu_type", "gpu_count", "tp_size", "pp_size", "dp_size")),
    "quantization": ("quantization", ("quantization",)),
    "speculation": ("speculative decoding", ("spec_method", "spec_draft_model")),
    "prefix_cache": ("prefix-cache hit rate", ()),  # measured, not configured
    "pd_disaggregation": ("PD disaggregation", ("pd_disaggregated", "prefill_gpu_type", "decode_gpu_type")),
}
"""The five variables that make the same weights run several times apart: name -> (words, configuration columns)."""
OTHER = ("model", "provider", "engine", "engine_version", "deployment")
"""Configuration columns outside the five: a controlled pair has them equal (``engine_version``: a pair of its own)."""
CACHE_MATERIAL = 0.05
"""Two prefix-cache hit rates at least this far apart (5 percentage points) differ."""


def _spec(c: Config) -> str | None:
    method = c["spec_method"]
    return None if method in (None, "", "none") else str(method)


def _value(c: Config, column: str) -> Any:
    """A column as compared: no speculation is one value (``none`` or untagged)."""
    if column == "spec_method":
        return _spec(c)
    if column == "spec_draft_model":
        return c[column] if _spec(c) else None
    return c[column]


def _hardware(c: Config) -> str:
    gpu = c["gpu_type"] or "GPU?"
    parts = [f"{c['gpu_count']}x{gpu}" if c["gpu_count"] else gpu]
    for column, short in (("tp_size", "tp"), ("pp_size", "pp"), ("dp_size", "dp")):
        if c[column] is not None and (column == "tp_size" or c[column] > 1):
            parts.append(f"{short}{c[column]}")
    return " ".join(parts)


def _pd(c: Config) -> str | None:
    if not c["pd_disaggregated"]:
        return None
    pools = [c["prefill_gpu_type"], c["decode_gpu_type"]]
    if any(p is not None and p != c["gpu_type"] for p in pools):
        return f"PD split {pools[0] or '?'}/{pools[1] or '?'}"
    return "PD split"


def _label(c: Config, model: str) -> str:
    if c["deployment"] != "self_hosted" and not any(c[x] for x in ("engine", "gpu_type")):
        head = " · ".join(x for x in ("api", c["provider"]) if x)
        return f"{head} · {c['model']}" if c["model"] != model else head
    parts = [" ".join(x for x in (c["engine"] or "engine?", c["engine_version"]) if x)]
    if c["model"] != model:
        parts.insert(0, str(c["model"]))
    if c["quantization"]:
        parts.append(str(c["quantization"]))
    if c["gpu_type"] or c["gpu_count"] or c["tp_size"]:
        parts.append(_hardware(c))
    parts += [x for x in (_pd(c), _spec(c)) if x]
    return " · ".join(parts)


def labels(configs: Sequence[Config], model: str) -> list[str]:
    """Readable labels (``vllm 0.6.0 · fp8 · 2xH100-SXM tp2 · eagle``); two alike get their cluster (then their
    deployment) to tell them apart."""
    out = [_label(c, model) for c in configs]
    for extra in ("cluster_id", "deployment", *CONFIG):
        alike = {x for x in out if out.count(x) > 1}
        if not alike:
            break
        for label in alike:
            group = [i for i, x in enumerate(out) if x == label]
            if len({str(configs[i][extra]) for i in group}) < 2:
                continue  # the same in all of them: says nothing
            for i in group:
                value = configs[i][extra]
                shown = value if extra in ("cluster_id", "deployment") else f"{extra} {value}"
                out[i] = f"{label} · {shown}"
    return out


def _cache(c: Config) -> tuple[float | None, str]:
    """The prefix-cache hit rate compared: the engine's (per call), else its metrics', else the client's."""
    for column, source in (("engine_hit_rate", "engine"), ("prefix_hit_rate", "engine metrics"),
                           ("client_hit_rate", "client")):  # fmt: skip
        if c.get(column) is not None:
            return c[column], source
    return None, "not measured"


def describe(c: Config, variable: str) -> str:
    """A configuration's value of one of the five variables, in words."""
    if variable == "hardware":
        return _hardware(c)
    if variable == "quantization":
        return str(c["quantization"] or "unknown")
    if variable == "speculation":
        return _spec(c) or "none"  # the draft model is in the spec_draft_model column
    if variable == "pd_disaggregation":
        return _pd(c) or ("colocated" if c["pd_disaggregated"] is not None else "untagged")
    rate, source = _cache(c)
    return "not measured" if rate is None else f"{rate:.1%} ({source})"


def _differs(a: Config, b: Config, variable: str) -> bool | None:
    if variable == "prefix_cache":
        (ra, _), (rb, _) = _cache(a), _cache(b)
        return None if ra is None or rb is None else abs(ra - rb) >= CACHE_MATERIAL
    return any(_value(a, x) != _value(b, x) for x in VARIABLES[variable][1])


def _pct(new: Any, old: Any) -> str | None:
    if new is None or old is None or not old:
        return None
    return f"{float(new) / float(old) - 1:+.0%}"


def _times(new: Any, old: Any) -> str | None:
    if new is None or old is None or not old:
        return None
    return f"{float(new) / float(old):.2f}x"


def _usd(v: Any) -> str:
    return format_usd(v, places=4, none="unpriced")


_MOVES: tuple[tuple[str, str, Any, Any], ...] = (
    # (column, words, how a value is shown, how the change is worded)
    ("decode_tps", "decode speed", lambda v: f"{v:.1f} tok/s", _times),
    ("ttft_p50_s", "TTFT p50", lambda v: f"{v:.3f} s", _pct),
    ("gpu_tps", "output tokens per GPU-second", lambda v: f"{v:.1f}", _times),
    ("usd_per_mtok", "$/1M tokens", _usd, _pct),
    ("loaded_usd_per_mtok", "$/1M tokens fully loaded", _usd, _pct),
    ("usd_per_completed_task", "$/completed task", _usd, _pct),
    ("error_rate", "error rate", lambda v: f"{v:.1%}", lambda n, o: None if n is None or o is None
     else f"{(n - o) * 100:+.1f} pp"),
)  # fmt: skip


def compare(fast: Config, slow: Config) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The fastest against the slowest: each variable's values and whether they differ, each metric's values and how
    it moved, and the sentence (association, not causation)."""
    variables: list[dict[str, Any]] = [
        {"variable": name, "words": words, "fastest": describe(fast, name), "slowest": describe(slow, name),
         "differs": _differs(fast, slow, name)}
        for name, (words, _) in VARIABLES.items()
    ]  # fmt: skip
    moved = []
    for column, words, show, change in _MOVES:
        a, b = fast.get(column), slow.get(column)
        if a is None and b is None:
            continue
        moved.append({"metric": words, "fastest": "-" if a is None else show(a),
                      "slowest": "-" if b is None else show(b), "change": change(a, b) or "-"})  # fmt: skip
    differ = [f"{v['words']}: {v['fastest']} vs {v['slowest']}" for v in variables if v["differs"]]
    same = [str(v["words"]) for v in variables if v["differs"] is False]
    unknown = [str(v["words"]) for v in variables if v["differs"] is None]
    head = f"{fast['config']} vs {slow['config']}: "
    head += ("differ in " + "; ".join(differ)) if differ else "none of the five variables differs"
    if same:
        head += "; the same: " + ", ".join(same)
    if unknown:
        head += "; not measured on both: " + ", ".join(unknown)
    others = [f"{x.replace('_', ' ')} {fast[x]} vs {slow[x]}" for x in OTHER if fast[x] != slow[x]]
    if others:
        head += "; also different: " + ", ".join(others)
    moves = [f"{m['metric']} {m['change']}" for m in moved if m["change"] != "-"]
    kinds = (fast.get("task_kinds") or [], slow.get("task_kinds") or [])
    if all(kinds) and kinds[0] != kinds[1] and any(m["metric"] == "$/completed task" for m in moved):
        moves = [
            m + f" (their tasks are different work: {', '.join(kinds[0])} vs {', '.join(kinds[1])})"
            if m.startswith("$/completed task")
            else m
            for m in moves
        ]
    tail = ". With them, fastest against slowest: " + ", ".join(moves) if moves else ""
    caveat = (
        ". Association, not causation: variables that differ together move together, and the data cannot tell which "
        "one did it (the pairs table compares configurations that differ in one variable only)"
    )
    return variables, moved, head + tail + caveat


def pairs(ranked: Sequence[Config]) -> list[dict[str, Any]]:
    """Every two ranked configurations that differ in one variable only (and in no column outside the five but the
    cluster; ``engine_version`` counts as a variable of its own here): the faster first, with both decode speeds."""
    variables = {n: cols for n, (_, cols) in VARIABLES.items() if cols} | {"engine_version": ("engine_version",)}
    out = []
    for i, a in enumerate(ranked):
        for b in ranked[i + 1 :]:
            if any(a[x] != b[x] for x in OTHER if x != "engine_version"):
                continue
            differ = [n for n, cols in variables.items() if any(_value(a, x) != _value(b, x) for x in cols)]
            if len(differ) != 1:
                continue
            name = differ[0]
            fast, slow = (a, b) if (a["decode_tps"] or 0) >= (b["decode_tps"] or 0) else (b, a)

            def value(c: Config, name: str = name) -> str:
                return str(c["engine_version"]) if name == "engine_version" else describe(c, name)

            out.append({
                "variable": name, "a": fast["config"], "b": slow["config"], "a_value": value(fast),
                "b_value": value(slow), "decode_tps_a": fast["decode_tps"], "decode_tps_b": slow["decode_tps"],
                "ratio": None if not slow["decode_tps"] else round(fast["decode_tps"] / slow["decode_tps"], 2),
            })  # fmt: skip
    return sorted(out, key=lambda p: (list(variables).index(p["variable"]), -(p["ratio"] or 0)))


def speculation_sentence(configs: Sequence[Config], found: Sequence[dict[str, Any]]) -> str | None:
    """Each speculating configuration's decode speed with speculation and without (its pair), beside its acceptance:
    a high acceptance alone does not make decoding faster (a draft model as big as the target halves it)."""
    parts = []
    for c in configs:
        spec = _spec(c)
        if spec is None:
            continue
        rate, length = c.get("accept_rate"), c.get("accept_length")
        accepted = "acceptance not measured" if rate is None else f"acceptance {rate:.0%}"
        if length is not None:
            accepted += f", mean acceptance length {length:.2f}"
        pair = next((p for p in found if p["variable"] == "speculation" and c["config"] in (p["a"], p["b"])), None)
        speed = "-" if c["decode_tps"] is None else f"{c['decode_tps']:.1f} tok/s"
        if pair is None:
            near = next(
                (p for p in pairs(configs) if p["variable"] == "speculation" and c["config"] in (p["a"], p["b"])), None
            )
            if near is None:
                why = "no configuration differs from it in speculation alone"
            else:
                other = near["b"] if near["a"] == c["config"] else near["a"]
                calls = {o["config"]: o["calls"] for o in configs}
                why = (
                    f"{other} differs from it in speculation alone, but with {calls[c['config']]:,} and "
                    f"{calls[other]:,} calls one of them is too few to rank"
                )
            parts.append(
                f"{c['config']} ({spec}): {accepted}; decode {speed} with it; {why}, so its speed without it is not "
                "measured (acceptance alone does not say it is faster)"
            )
            continue
        other = pair["b"] if pair["a"] == c["config"] else pair["a"]
        without = pair["decode_tps_b"] if pair["a"] == c["config"] else pair["decode_tps_a"]
        ratio = None if not without or c["decode_tps"] is None else c["decode_tps"] / without
        moved = "" if ratio is None else f": {ratio:.2f}x " + ("faster" if ratio >= 1 else "(slower with it)")
        parts.append(
            f"{c['config']} ({spec}): {accepted}; decode {speed} with it, {without:.1f} without ({other}){moved}"
        )
    return "; ".join(parts) or None


def spread(fast: Config, slow: Config) -> tuple[float | None, str]:
    """ "The fastest is 4.3x the slowest in decode speed", from the printed figures (tokens/s to one decimal)."""
    if fast is slow:
        return None, f"only {fast['config']} ({fast['configuration']}) can be ranked: nothing to compare it with"
    ratio = fast["decode_tps"] / slow["decode_tps"] if slow["decode_tps"] else None
    times = "-" if ratio is None else f"{ratio:.1f}x"
    text = (
        f"the fastest, {fast['config']} ({fast['configuration']}), is {times} the slowest, {slow['config']} "
        f"({slow['configuration']}), in decode speed: {fast['decode_tps']:.1f} vs {slow['decode_tps']:.1f} output "
        "tokens/s (medians per call)"
    )
    lo, hi = fast.get("decode_tps_low"), slow.get("decode_tps_high")
    if lo is not None and hi is not None and lo <= hi:
        text += "; their intervals overlap: more calls would tell them apart"
    return ratio, text
