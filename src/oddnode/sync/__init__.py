"""Synchronisation sensitivity: our bulk-synchronous kernel on node sets of
growing size (``oddnode sync``), how long each node makes the others wait,
and the slowdown against the concurrency with its linear extrapolation."""
