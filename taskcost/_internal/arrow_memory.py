"""Which allocator Arrow uses in taskcost's own processes (the server and its decode workers).

pyarrow's default pool is mimalloc. A decode worker builds a few small Arrow tables per request (its pool's peak is
under 1 MB), yet with mimalloc its resident memory grew by about 20 MB more than with the C library's allocator,
which it kept: 105 MB per worker under sustained load against 86 (see docs/configuration.md, "Memory or speed").
Throughput did not change. ``ARROW_DEFAULT_MEMORY_POOL``, when set, still wins: this only picks the default.
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["use_system_allocator"]


def use_system_allocator() -> None:
    """Allocate Arrow buffers with malloc in this process, unless ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise."""
    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
