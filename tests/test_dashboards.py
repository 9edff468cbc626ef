"""The dashboards are mounted in the same process and their callbacks answer from analytics.
(The placeholder page only; browser tests come with the real pages.)"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from taskcost.app import create_app
from taskcost.normalize import normalize_request
from taskcost.settings import Settings
from taskcost.store import DuckDBStore, prepare_batch
from tests.builders.dash import OVERVIEW_UPDATE
from tests.otlp_samples import sample_request


@pytest.fixture
def dash_client(settings: Settings, store: DuckDBStore) -> Iterator[TestClient]:
    store.write(prepare_batch(normalize_request(sample_request()), time.time_ns()))
    with TestClient(create_app(settings, store)) as c:
        yield c


def test_dash_is_served_under_its_prefix(dash_client: TestClient) -> None:
    r = dash_client.get("/dash/")
    assert r.status_code == 200
    assert '"requests_pathname_prefix":"\\u002fdash\\u002f"' in r.text  # Dash escapes the slashes
    layout = dash_client.get("/dash/_dash-layout")
    assert layout.status_code == 200 and '"Overview"' in layout.text


def test_overview_callback_reports_the_task(dash_client: TestClient) -> None:
    payload = OVERVIEW_UPDATE
    r = dash_client.post("/dash/_dash-update-component", json=payload)
    assert r.status_code == 200, r.text
    headline = r.json()["response"]["overview-headline"]["children"]
    # one completed task: 2 gpt-4o attempts ($0.0026 + $0.00475) and a $0.005 tool call
    assert headline == "1 tasks, 1 completed; cost per completed task $0.012350"
