"""Breakeven's verdict agrees with the figures it prints, on random traffic and prices (issue: renting is a step
function; the first replica's crossing was called "cheaper" while the observed volume needed two and the API's
month was lower than the rent's)."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from taskcost.analytics._breakeven_model import Profile, Rental, breakevens, cheapest, costs, verdict
from tests.budget import examples

_money = st.decimals(min_value=Decimal("0.01"), max_value=Decimal(500), places=2)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Profile, Rental]:
    tokens = draw(st.lists(st.integers(0, 5_000_000), min_size=1, max_size=48))
    if not any(tokens):
        tokens[0] = 1
    per_mtok = draw(_money)  # the API's price per million tokens, one for the window or one per hour
    varies = draw(st.booleans())
    api = [Decimal(t) * (draw(_money) if varies else per_mtok) / 1_000_000 for t in tokens]
    rental = Rental(
        tokens_per_s=Decimal(draw(st.integers(10, 5_000))),
        usd_per_gpu_hour=draw(st.decimals(min_value=Decimal("0.1"), max_value=Decimal(10), places=2)),
        gpus_per_replica=draw(st.integers(1, 8)),
        utilisation=draw(st.sampled_from([Decimal("0.5"), Decimal("0.9"), Decimal(1)])),
        min_replicas=draw(st.integers(0, 3)),
        sizing=draw(st.sampled_from(["peak", "p95"])),
        autoscale_buffer=draw(st.sampled_from([Decimal(0), Decimal("0.1")])),
    )
    return Profile(tokens, api), rental


@settings(max_examples=examples(150), deadline=None)
@given(cases())
def test_the_verdict_names_what_its_own_figures_say(case: tuple[Profile, Rental]) -> None:
    profile, rental = case
    o, b = costs(profile, rental), breakevens(profile, rental)
    text = verdict(profile, rental, o, b, "api")
    ways = {"the API": o.api_usd, "renting always-on": o.always_on_usd, "renting autoscaled": o.autoscaled_usd}
    if o.hybrid_replicas:
        ways["a hybrid"] = o.hybrid_usd
    best, usd = cheapest(o)
    assert usd == min(ways.values()) and ways[best] == usd
    if b.any:
        named = "The API is the cheapest" if best == "the API" else f"{best[0].upper()}{best[1:]} is the cheapest"
        assert named in text
        for other, cost in ways.items():  # no way cheaper than the one named
            assert cost >= usd, other
    else:
        assert "never wins" in text and o.api_usd <= min(o.always_on_usd, o.autoscaled_usd)
    # a breakeven at or below the observed volume exactly when that way costs no more than the API now
    if b.always_on is not None:
        assert (b.always_on <= 1) == (o.always_on_usd <= o.api_usd)
        at = costs(profile, rental, b.always_on)
        assert at.always_on_usd <= at.api_usd + Decimal("1e-9")
        assert ("costs no more than the API" in text) == (o.always_on_usd <= o.api_usd)
    else:
        assert o.always_on_usd > o.api_usd
    if b.autoscaled is not None and b.autoscaled_searched:
        assert (b.autoscaled <= 1) == (o.autoscaled_usd <= o.api_usd)
    if b.hybrid is not None and b.hybrid < 1:
        assert o.hybrid_replicas >= 1 and o.hybrid_usd <= o.api_usd
