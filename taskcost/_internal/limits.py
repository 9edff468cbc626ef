"""The operating system's limit on the serving process's memory, and sizes written as people write them.

``RLIMIT_DATA`` bounds a process's private writable memory (heap and anonymous mappings, the allocators' arenas
included): an allocation past it fails at once instead of growing the process. It is the bound no query shape can
get around (one ``printf('%-1000000000s', ...)`` allocates its whole value in one call, where no interrupt can
act): DuckDB answers such a query with an out-of-memory error and goes on. It counts reserved, not resident, memory:
the serving process reserves about 2 GB under load while about 0.5 GB is resident (thread stacks, allocator arenas),
so the limit sits well above the resident memory the query watchdog bounds (taskcost/store/_watchdog.py).
"""

from __future__ import annotations

import re

__all__ = ["data_limit", "parse_size", "set_data_limit"]

_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS |= {"KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Bytes in ``text``: ``"512MB"``, ``"1.5GiB"``, ``"1048576"`` (DuckDB's spellings). Raises ValueError."""
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (write e.g. 512MB or 1.5GiB)")
    return int(float(m[1]) * _UNITS[(m[2] or "").upper()])


def set_data_limit(limit_bytes: int) -> int:
    """Limit this process's data memory (``RLIMIT_DATA``) to ``limit_bytes``, never above a hard limit already set.
    Returns the limit now in force. Raises ValueError when it is below what the process already uses."""
    import resource

    in_use = data_in_use()
    if in_use and limit_bytes <= in_use:
        raise ValueError(
            f"process_memory_limit ({limit_bytes:,} bytes) is below what the server uses already ({in_use:,})"
        )
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return soft


def data_limit() -> int | None:
    """This process's data memory limit (None: unlimited)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft


def data_in_use() -> int:
    """This process's data memory now (``VmData``; 0 where /proc is not available)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0
