"""Files that readers may open at any moment (a CI job's JUnit report,
node_exporter's textfile): written beside their place, then renamed over
it, so that nobody ever reads half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Readable by everyone: the reader (node_exporter, a CI agent) may be another user.
MODE = 0o644


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` to ``path`` in one rename; on any failure the old file stays
    whole and no temporary file is left (OSError as it came)."""
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, MODE)  # mkstemp makes it 0600
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
