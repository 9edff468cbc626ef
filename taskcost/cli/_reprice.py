"""`taskcost reprice`: price stored calls again after a price, book or clusters change (through the running
server, which owns the file, or in the file itself when no server runs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from taskcost.cli._common import DbOption, UrlOption, app, err, fail, out, settings_or_exit
from taskcost.cli._prices import SinceOption, UntilOption, parse_time, pricing_config
from taskcost.cli._target import _error_message, _Remote, _running_server
from taskcost.pricing import ClusterWindowCost, RepriceReport, epoch_ns
from taskcost.settings import Settings
from taskcost.store import StoreUnavailableError

__all__ = ["cluster_windows", "reprice", "server_for"]

AdminOption = Annotated[
    str | None,
    typer.Option("--admin-token", help="Admin token of the server at --url [env TASKCOST_ADMIN_TOKEN]"),
]


class PricingServer(_Remote):
    """The pricing endpoints of a running server."""

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self._call(method, path, **kwargs)
        if resp.status_code != 200:
            raise StoreUnavailableError(f"server answered {resp.status_code}: {_error_message(resp)}")
        return resp.json()

    def get(self, path: str, **params: Any) -> Any:
        return self._json("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._json("POST", path, json=body)


def server_for(settings: Settings, *, admin: bool) -> PricingServer | None:
    """The server to ask: ``--url`` (with the admin token or key), else the one that owns ``--db``, else None."""
    if settings.url:
        token = settings.admin_token if admin else (settings.key or settings.admin_token)
        if admin and not token:
            raise fail("--url needs --admin-token (or TASKCOST_ADMIN_TOKEN) to re-price or read cluster costs")
        return PricingServer(settings.url, token, timeout_s=3600.0)
    running = _running_server(settings.db)
    if running:
        return PricingServer(running["url"], settings.admin_token or running.get("admin_token"), timeout_s=3600.0)
    return None


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def cluster_windows(
    settings: Settings, since: datetime | None, until: datetime | None, cluster: str | None
) -> list[ClusterWindowCost]:
    server = server_for(settings, admin=True)
    try:
        if server is not None:
            try:
                docs = server.get("/api/admin/clusters", since=_iso(since), until=_iso(until), cluster=cluster)
            finally:
                server.close()
            return [ClusterWindowCost.from_json(d) for d in docs]
        from taskcost.store import DuckDBStore

        with DuckDBStore.open(settings.db, read_only=True) as store:
            return store.cluster_costs(
                since_ns=None if since is None else epoch_ns(since),
                until_ns=None if until is None else epoch_ns(until),
                cluster_id=cluster,
            )
    except StoreUnavailableError as exc:
        raise fail(str(exc)) from None


def _money(value: Any) -> str:
    return f"${value:,.6f}"


def print_report(r: RepriceReport) -> None:
    scope = "all history" if r.since_ns is None and r.until_ns is None else "the calls in the range"
    head = "dry run, nothing changed: " if r.dry_run else ""
    out.print(f"{head}re-priced {scope} with {r.prices}; book {r.book or 'none'}", highlight=False)
    out.print(
        f"calls: {r.calls} examined, {r.changed} with a new cost ({r.newly_priced} newly priced, "
        f"{r.newly_unpriced} newly unpriced), {r.updated} updated in all, {r.unpriced_after} unpriced",
        highlight=False,
    )
    delta = r.after_usd - r.before_usd
    out.print(
        f"API calls total: before {_money(r.before_usd)}, after {_money(r.after_usd)} ({'+' if delta >= 0 else '-'}"
        f"{_money(abs(delta))})",
        highlight=False,
    )
    changes = [m for m in r.by_model if m.calls]
    if changes:
        table = Table("provider", "model", "calls changed", "before", "after")
        for m in changes[:15]:
            table.add_row(str(m.provider), str(m.model), str(m.calls), _money(m.before_usd), _money(m.after_usd))
        out.print(table)
    if r.tool_calls:
        out.print(
            f"tool calls priced by the book: {r.tool_calls}, {r.tools_changed} changed; "
            f"before {_money(r.tool_before_usd)}, after {_money(r.tool_after_usd)}",
            highlight=False,
        )
    if r.clusters:
        out.print(
            f"self-hosted ({r.clusters}): {r.windows} window(s), bill {_money(r.bill_usd)} = attributed "
            f"{_money(r.attributed_usd)} + idle {_money(r.idle_usd)}; {r.self_hosted_calls} call(s), "
            f"{r.self_hosted_changed} changed",
            highlight=False,
        )
    if r.caught_up:
        out.print(f"{r.caught_up} call(s) that arrived during the re-price were priced again", highlight=False)
    err.print(f"took {r.seconds:.2f} s", highlight=False)


@app.command()
def reprice(
    since: SinceOption = None,
    until: UntilOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what would change; change nothing")] = False,
    db: DbOption = None,
    url: UrlOption = None,
    admin_token: AdminOption = None,
) -> None:
    """Price stored calls again (all history, or calls that started in [--since, --until)) with the current
    price data, price book and clusters file, page by page; report what changed."""
    settings = settings_or_exit(db=db, url=url, admin_token=admin_token)
    start, end = parse_time(since, "--since"), parse_time(until, "--until")
    server = server_for(settings, admin=True)
    if server is not None:
        err.print(f"asking the server at {server.url} to re-price ...", highlight=False)
        try:
            doc = server.post("/api/admin/reprice", {"since": _iso(start), "until": _iso(end), "dry_run": dry_run})
        except StoreUnavailableError as exc:
            raise fail(str(exc)) from None
        finally:
            server.close()
        print_report(RepriceReport.from_json(doc))
        return
    from taskcost.store import DuckDBStore

    try:
        pricer = pricing_config(settings).build()
    except ValueError as exc:
        raise fail(f"the prices do not load, nothing was re-priced: {exc}") from None
    try:
        store = DuckDBStore.open(settings.db)
    except StoreUnavailableError as exc:
        raise fail(str(exc)) from None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=err, transient=True) as bar:
            tasks: dict[str, Any] = {}

            def progress(phase: str, done: int, total: int) -> None:
                if phase not in tasks:
                    tasks[phase] = bar.add_task(f"re-pricing {phase}", total=total)
                bar.update(tasks[phase], completed=done, total=total)

            report = store.reprice(
                pricer,
                since_ns=None if start is None else epoch_ns(start),
                until_ns=None if end is None else epoch_ns(end),
                dry_run=dry_run,
                progress=progress,
            )
    except StoreUnavailableError as exc:
        raise fail(str(exc)) from None
    finally:
        store.close()
    print_report(report)
