"""Units a result may carry, with their usual spellings.

Each unit has one canonical name that the store records; the aliases are the
spellings benchmark tools and sites use.  An unknown unit is an input error,
not a guess: a wrong unit silently turns MB into MiB or bits into bytes.
"""

from __future__ import annotations

from oddnode.core.model import Direction

# canonical name -> (aliases, the direction in which the quantity usually improves)
_UNITS: dict[str, tuple[tuple[str, ...], Direction]] = {
    "MB/s": (("mb/s", "mbytes/s", "mbyte/s", "mb/sec"), Direction.HIGHER),
    "MiB/s": (("mib/s",), Direction.HIGHER),
    "GB/s": (("gb/s", "gbytes/s", "gb/sec"), Direction.HIGHER),
    "GiB/s": (("gib/s",), Direction.HIGHER),
    "kB/s": (("kb/s", "kbytes/s"), Direction.HIGHER),
    "KiB/s": (("kib/s",), Direction.HIGHER),
    "Mbit/s": (("mbit/s", "mbps", "mbits/s"), Direction.HIGHER),
    "Gbit/s": (("gbit/s", "gbps", "gbits/s"), Direction.HIGHER),
    "GFLOP/s": (("gflop/s", "gflops", "gflop"), Direction.HIGHER),
    "MFLOP/s": (("mflop/s", "mflops"), Direction.HIGHER),
    "TFLOP/s": (("tflop/s", "tflops"), Direction.HIGHER),
    "Mop/s": (("mop/s", "mops", "mop/s total"), Direction.HIGHER),
    "GUP/s": (("gup/s", "gups"), Direction.HIGHER),
    "IOPS": (("iops",), Direction.HIGHER),
    "msg/s": (("msg/s", "messages/s"), Direction.HIGHER),
    # Events per second (OS-noise detours, interrupts): fewer is better.
    "1/s": (("/s", "per second", "events/s"), Direction.LOWER),
    "ns": (("ns", "nsec"), Direction.LOWER),
    "us": (("us", "usec", "µs", "μs", "microseconds"), Direction.LOWER),
    "ms": (("ms", "msec", "milliseconds"), Direction.LOWER),
    "s": (("s", "sec", "seconds"), Direction.LOWER),
    "B": (("b", "bytes"), Direction.HIGHER),
    "kB": (("kb",), Direction.HIGHER),
    "KiB": (("kib",), Direction.HIGHER),
    "MB": (("mb",), Direction.HIGHER),
    "MiB": (("mib",), Direction.HIGHER),
    "GB": (("gb",), Direction.HIGHER),
    "GiB": (("gib",), Direction.HIGHER),
    "%": (("%", "percent"), Direction.HIGHER),
    "count": (("count", "1", "n"), Direction.HIGHER),
    "": (("", "none"), Direction.HIGHER),
}

_BY_ALIAS = {alias: name for name, (aliases, _) in _UNITS.items() for alias in (*aliases, name.lower())}


class UnknownUnitError(ValueError):
    """A unit oddnode does not know."""


def canonical_unit(unit: str) -> str:
    """The canonical spelling of a unit; raises UnknownUnitError otherwise."""
    try:
        return _BY_ALIAS[unit.strip().lower()]
    except KeyError:
        known = ", ".join(name for name in _UNITS if name)
        raise UnknownUnitError(f"unknown unit {unit!r} (known: {known})") from None


def canonical_units() -> list[str]:
    """Every unit oddnode knows, by its canonical name ("" for none)."""
    return list(_UNITS)


def usual_direction(unit: str) -> Direction:
    """Times improve downwards, rates and sizes upwards."""
    return _UNITS[canonical_unit(unit)][1]


# canonical name -> (what it measures, its size in that dimension's base unit):
# the conversions between units of one dimension.  A unit not listed here is
# a dimension of its own, equal only to itself.
_SCALES: dict[str, tuple[str, float]] = {
    "kB/s": ("bandwidth", 1e3), "KiB/s": ("bandwidth", 2.0**10),
    "MB/s": ("bandwidth", 1e6), "MiB/s": ("bandwidth", 2.0**20),
    "GB/s": ("bandwidth", 1e9), "GiB/s": ("bandwidth", 2.0**30),
    "Mbit/s": ("bandwidth", 1e6 / 8), "Gbit/s": ("bandwidth", 1e9 / 8),  # 8 bits a byte
    "MFLOP/s": ("flops", 1e6), "GFLOP/s": ("flops", 1e9), "TFLOP/s": ("flops", 1e12),
    "ns": ("time", 1e-9), "us": ("time", 1e-6), "ms": ("time", 1e-3), "s": ("time", 1.0),
    "B": ("size", 1.0), "kB": ("size", 1e3), "KiB": ("size", 2.0**10), "MB": ("size", 1e6),
    "MiB": ("size", 2.0**20), "GB": ("size", 1e9), "GiB": ("size", 2.0**30),
    # Dimensions of one unit each, for their size in the base unit alone.
    "Mop/s": ("operations", 1e6), "GUP/s": ("updates", 1e9), "IOPS": ("io", 1.0),
    "msg/s": ("messages", 1.0), "1/s": ("events", 1.0), "%": ("fraction", 1e-2),
}


def base_scale(unit: str) -> tuple[str, float]:
    """(the dimension of ``unit``, its size in that dimension's base unit):
    ("bandwidth", 1e9) for GB/s, ("time", 1e-6) for us; a unit of no listed
    dimension is its own, of size 1 ("count", 1.0).  UnknownUnitError for
    a unit oddnode does not know."""
    name = canonical_unit(unit)
    return _SCALES.get(name, (name, 1.0))


def rounded(value: float) -> float:
    """A converted value rounded at 12 significant digits: 2.5 us is 2500
    ns, not the 2499.9999999999995 that binary fractions of 1e-6 / 1e-9 make."""
    return float(f"{value:.12g}")


class UnitMismatchError(ValueError):
    """Two units of different dimensions (a time where a bandwidth is meant)."""


def convert(value: float, unit: str, to_unit: str) -> float:
    """``value`` in ``unit`` expressed in ``to_unit`` (both known units of one
    dimension); raises UnknownUnitError or UnitMismatchError otherwise."""
    source, target = canonical_unit(unit), canonical_unit(to_unit)
    if source == target:
        return value
    (dimension, scale), (to_dimension, to_scale) = base_scale(source), base_scale(target)
    if dimension != to_dimension:
        raise UnitMismatchError(f"{source} cannot be converted to {target}, the series' unit")
    return rounded(value * scale / to_scale)


def duration(seconds: float) -> str:
    """Seconds as a person reads a wait: 12 s, 4 min 05 s, 2 h 03 min."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
