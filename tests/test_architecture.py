"""The walls between the rooms (docs: the architecture table), checked on the import graph."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _imports(root: Path) -> dict[str, set[str]]:
    """Top-level modules (and taskcost sub-packages) each file imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                parts = mod.split(".")
                names.add(".".join(parts[:2]) if parts[0] == "taskcost" else parts[0])
        found[str(path.relative_to(REPO))] = names
    return found


# ../architecture.md's table: what each room must not import (the composition root, taskcost/app.py, may import all)
_ROOT = {"taskcost.app", "taskcost._analytics_api", "taskcost.cli"}
FORBIDDEN = {
    "sdk/src": {"taskcost", "duckdb", "fastapi", "dash", "polars", "pyarrow", "genai_prices", "httpx"},
    "taskcost/normalize": {"duckdb", "taskcost.store", "taskcost.collector", "taskcost.pricing", *_ROOT},
    "taskcost/pricing": {
        "duckdb",
        "taskcost.store",
        "taskcost.collector",
        "taskcost.analytics",
        "taskcost.settings",
        "dashboards",
        *_ROOT,
    },
    "taskcost/store": {"taskcost.collector", "taskcost.analytics", "taskcost.settings", "dashboards", *_ROOT},
    "taskcost/analytics": {"duckdb", "taskcost.collector", "dashboards", *_ROOT},
    "taskcost/collector": {"duckdb", "taskcost.analytics", "dashboards", *_ROOT},
    "dashboards": {"duckdb", "taskcost.store", "taskcost.collector", "taskcost.pricing", "taskcost.settings", *_ROOT},
}


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_rooms_import_only_what_they_may(room: str) -> None:
    graph = _imports(REPO / room)
    assert graph, f"no Python files under {room}"
    bad = {f: sorted(mods & FORBIDDEN[room]) for f, mods in graph.items() if mods & FORBIDDEN[room]}
    assert not bad, f"{room} imports what it must not: {bad}"


def test_the_composition_root_is_the_only_place_that_mounts_the_dashboards() -> None:
    graph = _imports(REPO / "taskcost")
    users = sorted(f for f, mods in graph.items() if "dashboards" in mods)
    assert users == ["taskcost/app.py"], users


def test_only_the_store_imports_duckdb() -> None:
    graph = _imports(REPO / "taskcost")
    users = sorted(f for f, mods in graph.items() if "duckdb" in mods)
    assert users and all(f.startswith("taskcost/store/") for f in users), users


def test_sdk_allowed_third_party_is_opentelemetry_only() -> None:
    import sys

    stdlib = set(sys.stdlib_module_names)
    graph = _imports(REPO / "sdk" / "src")
    third = {m for mods in graph.values() for m in mods} - stdlib - {"taskcost_sdk", "__future__"}
    assert third <= {"opentelemetry", "pytest"}, third  # pytest: only the opt-in test plugin


def _private_imports(root: Path) -> dict[str, set[str]]:
    """Each file's imports of another package's private module (``taskcost.<room>._x`` from outside that room)."""
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(REPO)
        own = ".".join(rel.parts[:2]) if rel.parts[0] == "taskcost" else rel.parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                else []
            )
            for mod in mods:
                parts = mod.split(".")
                room = ".".join(parts[:2])
                private = any(p.startswith("_") and p != "__future__" for p in parts[2:])
                if parts[0] == "taskcost" and private and room != own and room != "taskcost._internal":
                    found.setdefault(str(rel), set()).add(mod)
    return found


def test_no_room_imports_another_rooms_private_modules() -> None:
    """A room's public names (its ``__init__``) are its contract; its ``_modules`` may change freely."""
    bad = {f: mods for room in ("taskcost", "dashboards") for f, mods in _private_imports(REPO / room).items()}
    assert not bad, f"imports of another room's private modules: {bad}"


def test_the_server_loads_polars_and_grpc_only_when_it_uses_them() -> None:
    """The serving process imports its app and dashboards without polars (a question loads it) or gRPC (an OTLP/gRPC
    port loads it): each is memory the collector holds while it only takes spans (23 and 8 MB)."""
    import subprocess
    import sys

    code = (
        "import sys, taskcost.app, taskcost.cli._serve, dashboards.app; "
        "print(sorted(m for m in ('polars', 'grpc') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_decode_workers_never_load_pandas() -> None:
    """pyarrow imports pandas, where it is installed, on its first array; the process the workers are forked from
    makes that array without it (tens of MB in every worker, and ~0.26 s at every start). Loaded as the fork server
    loads it, the workers' module leaves pandas out, and pyarrow still builds arrays and IPC streams."""
    import subprocess
    import sys

    code = (
        "import sys, taskcost.collector._worker_preload, pyarrow; "
        "pyarrow.array([1.5, None]); "
        "pyarrow.array(['x', None]); pyarrow.table({'b': [True, None]}); "
        "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('pandas.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout
