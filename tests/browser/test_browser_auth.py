"""The dashboards behind keys, in a real browser: Chromium answers the server's Basic challenge with the credentials
Playwright gives it (no header set by hand). A read key opens them; a wrong key, an ingest key or no key at all
does not, and the refused page shows no data."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Error as PlaywrightError

from tests.browser.conftest import control, settle
from tests.browser.test_browser_isolation import Projects, keyed_page, nav_paths, two_projects

__all__ = ["two_projects"]  # the fixture: the server with two projects' keys and data


def _content(page: Any) -> str:
    """The page's HTML once it stays put (after a refused navigation Chromium may still be committing its own
    error page)."""
    for _ in range(50):
        try:
            page.wait_for_load_state("load")
            html: str = page.content()
            return html
        except PlaywrightError as exc:
            if "navigating" not in str(exc):
                raise
            page.wait_for_timeout(100)
    raise AssertionError("the page kept navigating")


def _refused(page: Any, url: str, status: int) -> Any:
    """``url`` and a Dash callback are refused with ``status``, and nothing of either project's data shows. Returns
    the page's response: with credentials, the browser shows the refusal; without any, it has nothing to answer
    the challenge with, and the navigation ends there (headless Chromium has no prompt), on a blank page."""
    responses: list[Any] = []
    page.on("response", lambda r: responses.append(r) if r.url == url else None)
    try:
        page.goto(url)
    except PlaywrightError as exc:
        assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc), exc
    assert [r.status for r in responses] == [status], [(r.status, r.url) for r in responses]
    html = _content(page)
    assert not re.search("alpha|bravo", html, re.I), html[:2000]
    assert page.locator("#react-entry-point, a[id^='nav-']").count() == 0, html[:2000]  # no app, no navigation
    # the callbacks' door too, with the same credentials (the context's request client answers the same challenge)
    origin = url.split("/dash", 1)[0]
    callback = page.context.request.post(f"{origin}/dash/_dash-update-component", data={"output": "x"})
    assert callback.status == status, callback.status
    assert not re.search("alpha|bravo", callback.text(), re.I)
    return responses[0]


def test_a_read_key_opens_the_dashboards(browser: Any, two_projects: Projects) -> None:
    """Each project's read key, as the password of any user name; every page with it: test_browser_isolation.py."""
    server = two_projects.server
    for mine, other in (("alpha", "bravo"), ("bravo", "alpha")):
        with keyed_page(browser, two_projects.read[mine], username=f"someone-{mine}") as page:
            response = page.goto(f"{server.url}/dash/")
            assert response is not None and response.status == 200
            settle(page)  # every callback answered (a refused one is an error of the watch)
            assert len(nav_paths(page)) >= 2
            control(page, "project").click()  # the filter menu lists the key's project, and it alone
            listed = page.locator("[role='listbox']:visible [role='option']").all_text_contents()
            assert listed == [f"{mine}-team"], listed
            html = page.content()
            assert not any(f"{other}{v}" in html for v in ("-team", "_review", "-model", "-engine")), other
            assert not page.watch.errors, "\n".join(page.watch.errors)


def test_a_wrong_key_is_refused(browser: Any, two_projects: Projects) -> None:
    key = two_projects.read["alpha"]
    wrong = key[:-1] + ("a" if key[-1] != "a" else "b")  # one character off
    for password in (wrong, "tc_read_not-a-key", ""):
        with keyed_page(browser, password) as page:
            _refused(page, f"{two_projects.server.url}/dash/", 401)


def test_an_ingest_key_cannot_read_the_dashboards(browser: Any, two_projects: Projects) -> None:
    with keyed_page(browser, two_projects.ingest["alpha"]) as page:
        _refused(page, f"{two_projects.server.url}/dash/", 403)


def test_no_credentials_get_a_basic_challenge(browser: Any, two_projects: Projects) -> None:
    for path in ("/", "/tasks"):
        with keyed_page(browser, None) as page:
            response = _refused(page, f"{two_projects.server.url}/dash{path}", 401)
            challenge = response.headers.get("www-authenticate", "")
            assert challenge.startswith("Basic realm="), challenge
