"""The series the noise step stores, named once.

The kernel's module writes them, the finding rules and the report read
them: this module imports nothing, so that the analysis knows the names
without loading the runners.
"""

from __future__ import annotations

NOISE = "noise"  # the family: every series of the noise step
LOST_FRACTION = f"{NOISE}.lost_fraction"  # % of the CPUs' time the OS took, per node
DETOUR_RATE = f"{NOISE}.detour_rate"  # detours per second of one CPU, per node
DETOUR_MAX = f"{NOISE}.detour_max"  # the longest detour, us, per node
# The parameters of LOST_FRACTION's results carry the period of the lost
# time and the detour distribution (model.DETAILED_SERIES loads them).
