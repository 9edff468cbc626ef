"""What every decode worker loads, loaded once by the process the workers are forked from (``_decoders._context``).

This module does its work when imported: the fork server takes module names to import, nothing else. The imports
(protobuf, pyarrow, the normaliser, pricing) and the bundled price data are then in pages the workers share until
they write them; the cyclic collector is kept away from them (``gc.freeze``), so that it does not write to them.
"""

import gc

import pyarrow  # noqa: F401

import taskcost.collector._decoders  # noqa: F401  (and through it the intake: decoders, normaliser, rows)
from taskcost.pricing import default_pricer

default_pricer()
gc.collect()
gc.freeze()
