"""Every page opens in a real browser, on an empty store and on the demo's data, without an error."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import choose, open_page, settle, shot
from tests.conftest import Server


@pytest.mark.parametrize("path", ["/", "/tasks", "/cost", "/cache", "/canary", "/breakeven", "/sql", "/health"])
def test_every_page_opens_on_an_empty_store(page: Any, empty_server: Server, path: str) -> None:
    open_page(page, empty_server, path)
    assert page.locator(".tc-empty").count() >= 1, page.content()[:2000]
    shot(page, f"empty{path.replace('/', '-') or '-overview'}")


def test_a_filter_lands_in_the_url_and_changes_the_figures(page: Any, demo_server: Server) -> None:
    open_page(page, demo_server, "/")
    before = page.locator("#overview-headline").inner_text()
    kind = choose(page, "kind")
    assert f"kind={kind}" in page.url
    after = page.locator("#overview-headline").inner_text()
    assert after != before
    page.reload()
    settle(page)
    assert page.locator("#overview-headline").inner_text() == after
