"""What oddnode shows people: the terminal, plots and the HTML report."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

# The width that output rendered without a terminal's limit gets (``--wide``,
# a file or a pipe): wider than any table of oddnode's, so none is cut.
WIDE = 10_000


def plain(value: Any) -> Any:
    """Plain JSON: numpy scalars and arrays as numbers and lists, NaN and infinities as null."""
    # A numpy value exists only once numpy is loaded: the command line's
    # start (help, completion) need not load it to say so.
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        value = value.tolist()
    if np is not None and isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(key): plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
