"""How many examples a property test generates: its budget in the suite (small: the whole suite's limit is 15
minutes on a 2-core machine) times ``TASKCOST_TEST_EXAMPLES_SCALE`` (default 1). A deeper run:
``TASKCOST_TEST_EXAMPLES_SCALE=10 make unit``. The SQL isolation and sandbox properties have their own knob
(``TASKCOST_ISOLATION_EXAMPLES``)."""

from __future__ import annotations

import os

__all__ = ["examples"]

SCALE = float(os.environ.get("TASKCOST_TEST_EXAMPLES_SCALE", "1"))


def examples(n: int) -> int:
    """``n`` examples, scaled."""
    return max(1, round(n * SCALE))
