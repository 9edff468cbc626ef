"""The Canary page in a real browser: the verdict and every metric it shows are the CLI's (`taskcost canary --format
json` on a copy of the same demo database), for the arms the page says it compares, and they follow the controls
(baseline, candidate, golden set, dimension); on an empty store it says there is nothing yet."""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import choose, control, open_page, settle, shot
from tests.conftest import Server, run_cli

METRICS = (
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "ttft_p50",
    "ttft_p95",
    "ttft_p99",
    "error_rate",
    "task_success_rate",
    "cost_per_completed_task",
    "tokens_per_task",
)
OUTCOME_WORDS = {"better": "better", "within_margin": "within margin", "worse": "worse", "inconclusive": "inconclusive"}


@pytest.fixture(scope="module")
def cli_db(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the served demo database for the CLI (DuckDB lets one process hold a file)."""
    db = tmp_path_factory.mktemp("canary-cli") / "demo.duckdb"
    shutil.copy(demo_db, db)
    return db


@functools.cache
def cli_canary(db: Path, dimension: str, baseline: str, candidate: str, *, golden: bool = False) -> dict[str, Any]:
    """The CLI's answer (once per question: the database does not change)."""
    args = ["canary", "--db", str(db), "--dimension", dimension, "--baseline", baseline, "--candidate", candidate]
    done = run_cli(*args, *(["--golden"] if golden else []), "--format", "json", check=False)
    assert done.returncode in (0, 1, 3), done.stderr  # pass, fail, not enough data
    doc: dict[str, Any] = json.loads(done.stdout)
    assert {"pass": 0, "fail": 1, "not_enough_data": 3}[doc["summary"]["verdict"]] == done.returncode
    return doc


def value_of(page: Any, key: str) -> str:
    return str(control(page, key).input_value())


def shown_rows(page: Any) -> dict[str, list[str]]:
    return {m: page.locator(f"#canary-row-{m} td").all_inner_texts() for m in METRICS}


def first_number(text: str) -> float:
    m = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?", text)
    assert m, f"no number in {text!r}"
    return float(m.group(0).replace(",", ""))


def assert_page_is_the_cli(page: Any, doc: dict[str, Any]) -> None:
    """The verdict, and per metric: the sample sizes, both arms' values, the effect, its interval and the outcome."""
    s = doc["summary"]
    assert page.locator("#canary-verdict").inner_text().strip().lower().replace(" ", "_") == s["verdict"]
    assert (
        f"{s['candidate']} (candidate) against {s['baseline']} (baseline)"
        in page.locator("#canary-verdict-box").inner_text()
    )
    rows = shown_rows(page)
    table = doc["tables"]["metrics"]
    for raw in table["rows"]:
        r = dict(zip(table["columns"], raw, strict=True))
        cells = rows[r["metric"]]
        assert len(cells) == 10, (r["metric"], cells)
        _, base, cand, effect, ci, _, outcome, n, _, _ = cells
        assert n == f"{r['n_baseline']:,} / {r['n_candidate']:,}", r["metric"]
        assert outcome.strip().lower() == OUTCOME_WORDS[r["outcome"]], r["metric"]  # a badge: upper case in CSS
        for shown, want in ((base, r["baseline"]), (cand, r["candidate"])):
            if want is None:
                assert shown.strip() == "—"
            else:
                # shown as the page rounds: a percentage to 0.1, seconds to 3 digits, money to the microdollar
                tol = {"abs": 0.05 + 1e-9} if r["unit"] == "%" else {"rel": 5e-3, "abs": 5e-7}
                assert first_number(shown.replace("$", "")) == pytest.approx(float(want), **tol), r["metric"]
        if r["effect"] is None:
            assert effect.strip() == "—"
        else:  # a ratio to 3 places, a difference in pp to 1
            tol = 5e-4 if r["effect_unit"] == "ratio" else 0.05
            assert first_number(effect) == pytest.approx(r["effect"], abs=tol + 1e-9), r["metric"]
        ends = [float(x.replace(",", "")) for x in re.findall(r"[-+]?\d[\d,]*(?:\.\d+)?", ci)]
        want = [x for x in (r["ci_low"], r["ci_high"]) if x is not None]  # an open end is shown as ≥ or ≤
        tol = 5e-4 if r["effect_unit"] == "ratio" else 0.05
        assert ends == pytest.approx(want, abs=tol + 1e-9), (r["metric"], ci)


def test_an_empty_store_shows_the_empty_state(page: Any, empty_server: Server) -> None:
    open_page(page, empty_server, "/canary")
    assert page.locator(".tc-empty").count() == 1
    assert page.locator("#canary-verdict").count() == 0
    open_page(page, empty_server, "/canary?dimension=colour")  # a bad address: a message, not a traceback
    assert "unknown canary dimension 'colour'" in page.locator(".tc-error").inner_text()


def test_the_default_view_and_its_verdict_are_the_clis(page: Any, demo_server: Server, cli_db: Path) -> None:
    """With nothing chosen the page compares the two most common engine versions of the demo (0.6.0, the more common,
    as the baseline), and says so in its controls; what it shows is what the CLI answers for them."""
    open_page(page, demo_server, "/canary")
    picked = (value_of(page, "dimension"), value_of(page, "baseline"), value_of(page, "candidate"))
    assert picked == ("Engine version (2)", "0.6.0", "0.7.0")
    assert_page_is_the_cli(page, cli_canary(cli_db, "engine_version", "0.6.0", "0.7.0"))
    # the distributions: both arms' sampled successful calls, as many as the canary counts (the demo's arms are small)
    arms = cli_canary(cli_db, "engine_version", "0.6.0", "0.7.0")["tables"]["arms"]
    sampled = {r[0]: r[arms["columns"].index("sampled_calls")] for r in arms["rows"]}
    legend = page.locator("#canary-distributions .legendtext").evaluate_all("els => els.map(e => e.textContent)")
    assert legend == [f"baseline 0.6.0 (n={sampled['baseline']:,})", f"candidate 0.7.0 (n={sampled['candidate']:,})"]
    shot(page, "canary", readme=True)


def test_baseline_candidate_and_golden_change_the_numbers_to_the_clis(
    page: Any, demo_server: Server, cli_db: Path
) -> None:
    open_page(page, demo_server, "/canary?dimension=engine_version&baseline=0.6.0&candidate=0.7.0")
    before = shown_rows(page)

    page.locator(".mantine-Chip-label", has_text="Golden set only").click()  # the chip of the URL's golden
    settle(page)
    assert "golden=1" in page.url
    golden = cli_canary(cli_db, "engine_version", "0.6.0", "0.7.0", golden=True)
    assert_page_is_the_cli(page, golden)
    assert shown_rows(page) != before
    assert "--golden" in page.locator("#canary-cli").inner_text()

    choose(page, "baseline", "0.7.0")  # the candidate was 0.7.0 too: it becomes the other value
    assert (value_of(page, "baseline"), value_of(page, "candidate")) == ("0.7.0", "0.6.0")
    assert "baseline=0.7.0" in page.url and "golden=1" in page.url
    assert_page_is_the_cli(page, cli_canary(cli_db, "engine_version", "0.7.0", "0.6.0", golden=True))

    page.reload()  # the URL is the state
    settle(page)
    assert_page_is_the_cli(page, cli_canary(cli_db, "engine_version", "0.7.0", "0.6.0", golden=True))


def test_another_dimension_lists_its_own_values(page: Any, demo_server: Server, cli_db: Path) -> None:
    open_page(page, demo_server, "/canary?dimension=engine_version&baseline=0.6.0&candidate=0.7.0")
    choose(page, "dimension", "GPU type")
    assert "dimension=gpu_type" in page.url
    base, cand = value_of(page, "baseline"), value_of(page, "candidate")
    assert {base, cand} == {"H100-SXM", "A100-80GB"}  # the demo's two GPU types, not the engine versions
    assert_page_is_the_cli(page, cli_canary(cli_db, "gpu_type", base, cand))

    choose(page, "dimension", "Harness version (1)")  # the demo runs one harness: nothing to compare, and it says so
    assert "fewer than two values" in page.locator(".tc-prompt").inner_text()
    assert page.locator("#canary-verdict").count() == 0
