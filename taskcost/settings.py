"""The one configuration registry.

Precedence, highest first: explicit argument > environment variable ``TASKCOST_<NAME>`` >
config file (``taskcost.toml`` in the working directory, or the file ``TASKCOST_CONFIG`` names) >
default. Every field here must be documented in ``docs/configuration.md`` (a test enforces it).
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from taskcost._internal.places import DEFAULT_CONFIG_FILE, DEFAULT_DB, config_file

if TYPE_CHECKING:
    from taskcost.normalize import NormalizeRules
    from taskcost.pricing import PricingConfig

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "STORE_SCHEMES",
    "EngineTarget",
    "Settings",
    "config_file",
    "default_decode_workers",
    "load_settings",
]

MiB = 1024 * 1024
# The server's default DuckDB memory_limit, per core left after the decode workers (Settings.server_memory_limit)
MEMORY_PER_DUCKDB_THREAD_MB = 128


def default_decode_workers() -> int:
    """One decode worker per core, at most 4: decoding is the largest part of intake's CPU (figures: bench/RESULTS.md
    and docs/configuration.md, "Memory or speed")."""
    return max(1, min(4, os.cpu_count() or 1))


def _pricing_defaults() -> tuple[dict[str, str], tuple[str, ...]]:
    """The pricing module's defaults (plain data: the price data library is not loaded for them)."""
    from taskcost.pricing import DEFAULT_PRICING_ATTRIBUTES, PRICING_TARGETS

    return dict(DEFAULT_PRICING_ATTRIBUTES), PRICING_TARGETS


STORE_SCHEMES = ("clickhouse", "chdb")
"""The ``store`` URLs' schemes (the DuckDB file needs none: it is ``db``)."""


class EngineTarget(BaseModel):
    """One inference engine's Prometheus endpoint the server scrapes (``engine_scrape``)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        pattern=r"^https?://\S+$", description="The engine's metrics URL, e.g. http://10.0.0.5:8000/metrics."
    )
    cluster_id: str = Field(min_length=1, max_length=256, description="The cluster its samples are stored under.")
    engine: Literal["vllm", "sglang", "llamacpp"]
    model: str | None = Field(None, description="The model of samples without a model_name label (llama.cpp).")
    project: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    interval_s: float = Field(15.0, ge=1, le=3600, description="Seconds between two scrapes.")


class Settings(BaseSettings):
    """taskcost's settings. See docs/configuration.md for each one."""

    model_config = SettingsConfigDict(env_prefix="TASKCOST_", extra="forbid", validate_default=True)

    db: Path = Field(Path(DEFAULT_DB), description="The DuckDB file that holds everything.")
    store: str | None = Field(
        None,
        description="Where the data lives when not in the DuckDB file `db`: clickhouse://user:password@host:8123/db "
        "(a ClickHouse server, many collectors) or chdb:///path/to/dir (the same store on an in-process chDB).",
    )
    host: str = Field("127.0.0.1", description="Address the server binds to.")
    port: int = Field(4318, ge=1, le=65535, description="Port of OTLP/HTTP, the query API and dashboards.")
    grpc_port: int = Field(4317, ge=0, le=65535, description="Port of OTLP/gRPC; 0 turns the gRPC receiver off.")
    max_body_bytes: int = Field(
        64 * MiB, ge=1024, description="Largest accepted request body, after decompression (413 above)."
    )
    api_max_body_bytes: int = Field(
        1 * MiB,
        ge=1024,
        description="Largest request body of the API (not OTLP intake: max_body_bytes), read only after the "
        "caller's key was checked (413 above).",
    )
    sql_timeout_s: float = Field(10.0, gt=0, description="A user SQL query is interrupted after this.")
    sql_max_rows: int = Field(10_000, ge=1, description="Rows returned by one SQL query at most.")
    sql_max_result_bytes: int = Field(
        32 * MiB, ge=1024, description="Bytes of values returned by one SQL query at most (about: as JSON)."
    )
    sql_max_value_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Largest value a size argument of user SQL may ask for (repeat, lpad, rpad, list_resize, bar).",
    )
    sql_max_concurrent: int = Field(4, ge=1, le=256, description="User SQL queries running at once at most.")
    sql_max_queued: int = Field(
        16, ge=0, le=10_000, description="User SQL queries waiting for a slot at most; beyond, 429 + Retry-After."
    )
    writer_max_batch_spans: int = Field(
        20_000, ge=1, description="Spans the single writer commits in one transaction at most."
    )
    memory_limit: str | None = Field(
        None,
        pattern=r"^\s*\d+(\.\d+)?\s*([KMGT]i?B)?\s*$",
        description="DuckDB's memory limit in the server: its cache of the database and query working memory "
        "(larger queries spill to disk); default: 128MB per core left after the decode workers and the serving "
        "process, at least one.",
    )
    duckdb_threads: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="DuckDB's threads in the server (commits and queries); default: the cores left after the "
        "decode workers and the serving process, at least 2 on a machine with 2 cores or more (a query uses both).",
    )
    sql_memory_limit: str | None = Field(
        None,
        pattern=r"^\s*\d+(\.\d+)?\s*([KMGT]i?B)?\s*$",
        description="User queries (SQL API, analytics, dashboards) are interrupted while the serving process's "
        "resident memory is past this; default: DuckDB's memory limit + 1GiB.",
    )
    process_memory_limit: str | None = Field(
        None,
        pattern=r"^\s*(\d+(\.\d+)?\s*([KMGT]i?B)?|unlimited)\s*$",
        description="The operating system's limit on the serving process's data memory (RLIMIT_DATA): an allocation "
        "past it fails (a query gets an out-of-memory error); default: sql_memory_limit + 3GiB; 'unlimited': none.",
    )
    spool: bool = Field(
        True,
        description="Acknowledge intake once it is fsynced to the spool beside the database (<db>.spool/) and "
        "commit behind it in large transactions; false: acknowledge only after the DuckDB commit.",
    )
    max_queued_spans: int = Field(
        100_000, ge=1, description="Spans waiting for the writer at most; beyond, intake answers 503 (back-pressure)."
    )
    max_queued_s: float = Field(
        2.5,
        gt=0,
        description="Spans waiting for the writer at most this many seconds of its measured commit rate (and at "
        "most max_queued_spans); beyond, intake waits, then answers 503. Reads wait for what was acknowledged "
        "before them: this bounds how long.",
    )
    spool_max_bytes: int = Field(
        1024**3,
        ge=1024,
        description="With the ClickHouse store (`store`): bytes of acknowledged spool records not yet in ClickHouse at "
        "most (it grows while ClickHouse cannot be reached); beyond, intake answers 503.",
    )
    dedupe_window_spans: int = Field(
        1_000_000,
        ge=1,
        description="A re-sent span (or provider response) is recognised and stored once while fewer than this "
        "many spans (responses) were stored after it; beyond twice as many, it is stored again.",
    )
    max_inflight_requests: int = Field(
        8, ge=1, description="Intake requests decoded at once at most; beyond, 503 (bounds memory)."
    )
    decode_workers: int = Field(
        default_factory=default_decode_workers,
        ge=0,
        le=64,
        description="Worker processes that decode, normalise and price intake requests (0: in the serving process); "
        "default: one per core, at most 4.",
    )
    backpressure_wait_s: float = Field(
        4.0, ge=0, description="How long a request waits for a decoding slot or queue room before a 503."
    )
    # OTLP intake limits (taskcost/normalize/_limits.py; the defaults are IntakeLimits'; docs/security.md, "Intake")
    attribute_count_limit: int = Field(
        1024,
        ge=1,
        description="Attributes of one span, resource or scope kept at most (those the collector reads first); "
        "the rest are dropped and counted (the span's dropped_attributes_count).",
    )
    event_attribute_count_limit: int = Field(
        128, ge=1, description="Attributes of one span event kept at most; the rest are dropped and counted."
    )
    span_event_count_limit: int = Field(
        1024, ge=1, description="Events of one span kept at most; the rest are dropped and counted."
    )
    attribute_value_length_limit: int = Field(
        1024 * 1024, ge=1, description="Characters of one string attribute value kept at most; longer ones are cut."
    )
    max_decoded_bytes: int = Field(
        512 * MiB,
        ge=MiB,
        description="Memory one intake request may expand into once decoded (estimated before each step); "
        "above it the request is refused (413).",
    )
    auth: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Whether requests need a key: auto (once any key was ever created, revoked ones included, or "
        "when the server listens beyond loopback), on, or off (loopback only, loudly).",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="With auth = auto, serve a non-loopback address without keys while no API key was ever created.",
    )
    admin_token: str | None = Field(
        None, min_length=16, description="Token for key management over HTTP (else one is generated per run)."
    )
    first_keys_project: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="When the server starts and no API key was ever created, create an ingest and a read key of this "
        "project and print their secrets once (the container sets it).",
    )
    task_id_attributes: list[str] = Field(
        default_factory=lambda: list(_default_rules().task_id_attributes),
        description="Attributes that name a foreign span's task, first found wins (else the trace is the task).",
    )
    task_outcome_attribute: str | None = Field(
        None, description="An attribute of the task's root span that tells its outcome (see task_outcome_values)."
    )
    task_outcome_values: dict[str, Literal["completed", "failed", "abandoned"]] = Field(
        default_factory=dict, description="Values of task_outcome_attribute and the outcome each one means."
    )
    implicit_tasks: bool = Field(True, description="Treat root agent/workflow spans of foreign traces as tasks.")
    fold_duplicate_spans: bool = Field(
        True, description="Count one provider response once when several instrumentations report it."
    )
    url: str | None = Field(
        None, description="Base URL of a running server for `taskcost sql`/`tasks` (else found by --db)."
    )
    key: str | None = Field(None, description="API key the CLI sends to --url (a read key for sql/tasks).")
    prices_dir: Path | None = Field(
        None, description="Where `taskcost prices update` keeps price data files (default: <db>.prices/)."
    )
    price_book_file: Path | None = Field(None, description="A price book file (TOML), instead of [price_book].")
    price_book: dict[str, Any] | None = Field(None, description="The price book, inline: a [price_book] table.")
    clusters_file: Path | None = Field(None, description="Self-hosted clusters file (TOML): GPUs and their price.")
    pricing_attributes: dict[str, str] = Field(
        default_factory=lambda: _pricing_defaults()[0],
        description="Span attributes that select a price variant (service tier, batch) or give 1h cache writes.",
    )
    cluster_window_s: int = Field(
        3600, ge=60, le=86400, description="Window over which a cluster's bill is allocated (divides a day)."
    )
    allocate_clusters: bool = Field(
        True, description="The server allocates each cluster window once it has ended (false: `taskcost reprice`)."
    )
    cluster_allocation_delay_s: float = Field(
        60.0, ge=0, le=86400, description="How long after a cluster window ends the server allocates it."
    )
    engine_scrape: list[EngineTarget] = Field(
        default_factory=list,
        description="Inference engines' Prometheus endpoints the server scrapes into engine_metrics: a list of "
        '{"url", "cluster_id", "engine": "vllm"|"sglang"|"llamacpp", "model"?, "project"?, "interval_s"?}.',
    )
    engine_max_series: int = Field(
        10_000,
        ge=1,
        description="Distinct engine metric series one project may have (cluster, engine, model, metric, labels); "
        "samples of further series are dropped and counted.",
    )

    def listens_beyond_loopback(self) -> bool:
        """Whether ``host`` is reachable from other machines (anything but a loopback address or ``localhost``)."""
        if self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host).is_loopback
        except ValueError:  # a name: it may resolve to anything
            return True

    def _cores_left(self) -> int:
        """The cores left after the decode workers and the serving process, at least 1."""
        return max(1, (os.cpu_count() or 1) - self.decode_workers - 1)

    def server_duckdb_threads(self) -> int:
        """``duckdb_threads``, or by default the cores left after the decode workers and the serving process, at
        least 2 on a machine with 2 cores or more. On 2 cores that is 2: a dashboard's question answers in about
        half the time, and ingest at saturation is about a quarter slower than with 1 thread (docs/configuration.md
        has the figures; ``TASKCOST_DUCKDB_THREADS=1`` for a collector that only ingests)."""
        if self.duckdb_threads is not None:
            return self.duckdb_threads
        return max(min(2, os.cpu_count() or 1), self._cores_left())

    def server_memory_limit(self) -> str:
        """``memory_limit``, or by default ``MEMORY_PER_DUCKDB_THREAD_MB`` times the cores left after the decode
        workers and the serving process (at least one: 128MB on 2 cores), or times ``duckdb_threads`` when that is
        set. DuckDB fills what it is allowed with cached blocks, so the limit is most of the server's memory under
        load (measured: docs/configuration.md and bench/RESULTS.md)."""
        if self.memory_limit is not None:
            return self.memory_limit
        threads = self.duckdb_threads if self.duckdb_threads is not None else self._cores_left()
        return f"{MEMORY_PER_DUCKDB_THREAD_MB * threads}MB"

    def server_sql_memory_limit(self) -> int:
        """``sql_memory_limit`` in bytes, or by default DuckDB's memory limit in the server plus 1 GiB: the queries'
        resident memory beyond what DuckDB can spill, on top of intake's (about 0.5 GB under load)."""
        from taskcost._internal.limits import parse_size

        if self.sql_memory_limit is not None:
            return parse_size(self.sql_memory_limit)
        return parse_size(self.server_memory_limit()) + parse_size("1GiB")

    def server_process_memory_limit(self) -> int | None:
        """``process_memory_limit`` in bytes (None: unlimited), or by default ``server_sql_memory_limit`` plus 3 GiB:
        the limit counts reserved memory, about 2 GB of which the serving process reserves under load without using
        it (thread stacks, allocator arenas; docs/security.md)."""
        from taskcost._internal.limits import parse_size

        if self.process_memory_limit is None:
            return self.server_sql_memory_limit() + parse_size("3GiB")
        if self.process_memory_limit.strip() == "unlimited":
            return None
        return parse_size(self.process_memory_limit)

    @model_validator(mode="after")
    def _store_is_valid(self) -> Settings:
        if self.store is not None:
            scheme = self.store.partition("://")[0]
            if scheme not in STORE_SCHEMES or "://" not in self.store:
                raise ValueError(
                    f"store: {self.store!r} is not a store URL: clickhouse://user:password@host:8123/db or "
                    "chdb:///path/to/dir (leave it unset for the DuckDB file `db`)"
                )
        return self

    @model_validator(mode="after")
    def _rules_are_valid(self) -> Settings:
        from taskcost.normalize import NormalizeRules

        NormalizeRules.build(
            task_id_attributes=self.task_id_attributes,
            outcome_attribute=self.task_outcome_attribute,
            outcome_values=self.task_outcome_values,
            implicit_tasks=self.implicit_tasks,
            fold_duplicates=self.fold_duplicate_spans,
        )
        return self

    @model_validator(mode="after")
    def _pricing_is_valid(self) -> Settings:
        targets = _pricing_defaults()[1]
        if self.price_book is not None and self.price_book_file is not None:
            raise ValueError("give the price book inline ([price_book]) or as price_book_file, not both")
        for name in ("price_book_file", "clusters_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: {path} is not a file")
        bad = {k: v for k, v in self.pricing_attributes.items() if v not in targets}
        if bad:
            raise ValueError(f"pricing_attributes: {bad} map to unknown targets; known: {', '.join(targets)}")
        if 86400 % self.cluster_window_s:
            raise ValueError("cluster_window_s must divide a day (86400 s) so windows align with the clock")
        if self.price_book is not None:  # only then the price data library is loaded
            from taskcost.pricing import price_book_from_table

            price_book_from_table(self.price_book, config_file())
        return self

    def pricing_config(self) -> PricingConfig:
        """Where this configuration's prices come from: price data directory, price book, clusters file, pricing
        attributes and window. Built once where the app is assembled (and once per decode worker)."""
        from taskcost.pricing import PricingConfig, file_book_table

        path = config_file().absolute()
        return PricingConfig(
            prices_dir=self.prices_dir or self.db.with_name(self.db.name + ".prices"),
            book_file=self.price_book_file,
            book_table=self.price_book,
            # follow edits of [price_book] in the config file only when that is where the book came from
            book_table_fixed=self.price_book is None or self.price_book != file_book_table(path),
            config_file=path,
            clusters_file=self.clusters_file,
            attributes=tuple(self.pricing_attributes.items()),
            window_s=self.cluster_window_s,
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=config_file()))


def load_settings(**overrides: Any) -> Settings:
    """Settings with the documented precedence; ``None`` overrides mean "not given"."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if "TASKCOST_CONFIG" in os.environ and not config_file().is_file():
        raise ValueError(f"TASKCOST_CONFIG names {str(config_file())!r}, which is not a file")
    return Settings(**given)


def _default_rules() -> NormalizeRules:
    from taskcost.normalize import DEFAULT_RULES

    return DEFAULT_RULES
