"""Whether a process still runs, as the tests that end processes ask it."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie waiting for its reaper;
    one that ends while it is looked at is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone: FileNotFoundError, or ProcessLookupError once open
        return False
    _, closing, fields = stat.rpartition(")")
    return bool(closing) and fields.split()[:1] != ["Z"]
