"""What every decode worker loads, loaded once by the process the workers are forked from (``_decoders._context``).

This module does its work when imported: the fork server takes module names to import, nothing else. The imports
(protobuf, pyarrow, the normaliser, pricing) and the bundled price data are then in pages the workers share until
they write them; the cyclic collector is kept away from them (``gc.freeze``), so that it does not write to them.

Arrow's first array and first IPC stream set up about 45 MB (its kernels and type machinery) that a worker would
otherwise make on its first request, in pages of its own: made here, the workers share them (a worker's own pages
at rest went from about 46 MB to a few).
"""

import gc
import sys
from importlib.abc import MetaPathFinder
from typing import Any

import pyarrow
import pyarrow.ipc

import taskcost.collector._decoders  # noqa: F401  (and through it the intake: decoders, normaliser, rows)
from taskcost._internal.arrow_memory import use_system_allocator
from taskcost.pricing import default_pricer


class _NoPandas(MetaPathFinder):
    """pyarrow imports pandas, where it is installed, on its first array (to recognise pandas objects among the
    values), and tries again on some later ones while it has none: nothing a worker does involves pandas, which took
    ~0.26 s to import and tens of MB that every worker mapped. Refused in this process and the workers forked from
    it; pyarrow goes on without pandas."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not loaded by the decode workers")


default_pricer()
use_system_allocator()  # (the allocator the workers use: ``_decoders._init``)
if "pandas" not in sys.modules:
    sys.meta_path.insert(0, _NoPandas())
_warm = pyarrow.table({"n": pyarrow.array([1], pyarrow.int64()), "s": pyarrow.array(["x"], pyarrow.string())})
with pyarrow.ipc.new_stream(pyarrow.BufferOutputStream(), _warm.schema) as _stream:
    _stream.write_table(_warm)
del _warm, _stream
gc.collect()
gc.freeze()
