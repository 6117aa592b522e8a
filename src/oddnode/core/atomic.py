"""How oddnode writes an output file (a report, an export, a textfile).

A regular file (or a name not yet taken) is written beside its place and
renamed over it, so that a reader that may open it at any moment (a CI
job's JUnit report, node_exporter's textfile) never reads half of one.  A
stream named as the target, a character device or a FIFO (``/dev/null``,
``/dev/stdout``, a pipe a reader waits on), is written through: opened and
written, never replaced.  Anything else that already holds the name is
refused and left as it was: a directory, a socket, a block device, a
symbolic link to a file (a rename would replace the link, writing through
it would change a file elsewhere).  Parent directories are never created:
a missing one is an error naming it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Readable by everyone: the reader (node_exporter, a CI agent) may be another user.
MODE = 0o644
# What a file name made from data (a benchmark's name) may hold: letters,
# digits, dot, dash, underscore and colon (``pingpong.cut:latency.0``, which
# STAB's import reads back as benchmark and metric); anything else, the
# slash first, becomes an underscore.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._:-]+")
# The longest name most file systems take (bytes; the name is ASCII by then).
_NAME_MAX = 255


class OutputRefused(ValueError):
    """A path oddnode will not write: what holds it is not a regular file,
    or its directory does not exist (the command line is wrong: exit 2)."""


class OutputUnwritable(OSError):
    """A write the system refused (no space, no permission, a FIFO nobody
    reads): one line naming the path (the command could not run: exit 3)."""

    def __str__(self) -> str:  # one line, without OSError's "[Errno N]"
        return f"cannot write {self.filename}: {self.strerror}"


def _unwritable(path: Path, err: OSError) -> OutputUnwritable:
    return OutputUnwritable(err.errno, err.strerror or str(err), str(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _is_stream(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _target_mode(path: Path) -> int | None:
    """The mode of what ``path`` names, followed through links when it ends
    in a stream; None when the name is free; OutputRefused for what may be
    neither replaced nor written through."""
    try:
        own = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise _unwritable(path, err) from None
    if stat.S_ISREG(own.st_mode):
        return own.st_mode
    if stat.S_ISLNK(own.st_mode):
        try:
            pointed = os.stat(path)
        except OSError:
            raise OutputRefused(f"{path} is a symbolic link to nothing: not replaced") from None
        if _is_stream(pointed.st_mode):
            return pointed.st_mode
        raise OutputRefused(f"{path} is a symbolic link: not replaced (give the file it points to)")
    if _is_stream(own.st_mode):
        return own.st_mode
    raise OutputRefused(f"{path} is {_kind(own.st_mode)}: not replaced")


def _check_parent(path: Path) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise OutputRefused(f"cannot write {path}: directory {parent} does not exist (it is not created)")


def _write_through(path: Path, data: bytes) -> None:
    """Write to a character device or FIFO as it is.  A FIFO is opened
    without waiting: with no reader the open fails at once instead of
    hanging (ENXIO), and the writes then block as a pipe's do."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OutputUnwritable(err.errno, "no process reads the FIFO", str(path)) from None
        raise _unwritable(path, err) from None
    try:
        if not _is_stream(os.fstat(fd).st_mode):  # swapped for a file since it was looked at
            raise OutputRefused(f"{path} changed while being written: not written")
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as err:
        raise _unwritable(path, err) from None
    finally:
        os.close(fd)


@contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a file name
    (DuckDB's COPY), renamed over ``path`` when the block ends without an
    error; removed otherwise, the old file left whole.  ``path`` must be a
    regular file or free (OutputRefused)."""
    target = Path(path)
    _check_parent(target)
    mode = _target_mode(target)
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputRefused(f"{target} is not a regular file: not replaced")
    try:
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        raise _unwritable(target, err) from None
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, MODE)  # mkstemp makes it 0600
        os.replace(temporary, target)
    except OSError as err:
        temporary.unlink(missing_ok=True)
        raise _unwritable(target, err) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def check_target(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, a path write_atomically would refuse
    (OutputRefused): a command checks its outputs before it runs."""
    target = Path(path)
    _check_parent(target)
    _target_mode(target)


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` to ``path``: a regular file replaced in one rename (on any
    failure the old one stays whole and no temporary is left), a character
    device or FIFO written through; anything else refused (OutputRefused).
    A write the system refuses is OutputUnwritable."""
    target = Path(path)
    _check_parent(target)
    mode = _target_mode(target)
    if mode is not None and _is_stream(mode):
        _write_through(target, data)
        return
    with replacing(target) as temporary:
        with open(temporary, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())


def output_directory(path: str | os.PathLike[str]) -> Path:
    """A directory to write files into: made when missing, its parent never
    (OutputRefused); an existing one, or a link to one, used as it is."""
    directory = Path(path)
    if directory.is_dir():
        return directory
    if os.path.lexists(directory):
        raise OutputRefused(f"{directory} exists and is not a directory")
    _check_parent(directory)
    try:
        directory.mkdir()
    except FileExistsError:  # made meanwhile: fine if it is a directory
        if not directory.is_dir():
            raise OutputRefused(f"{directory} exists and is not a directory") from None
    except OSError as err:
        raise _unwritable(directory, err) from None
    return directory


def safe_file_name(name: str) -> str:
    """A file name made from data: only letters, digits, ``.``, ``-``, ``_``
    and ``:``; no leading dot (no hidden file, no ``..``); never empty."""
    cleaned = _NOT_IN_NAME.sub("_", name).lstrip(".") or "_"
    return cleaned[:_NAME_MAX]


def inside(directory: str | os.PathLike[str], name: str) -> Path:
    """``directory``/``name`` for a name made from data, checked to stay
    inside the directory once both are resolved (OutputRefused otherwise)."""
    path = Path(directory) / safe_file_name(name)
    if path.resolve().parent != Path(directory).resolve():
        raise OutputRefused(f"{name!r} would be written outside {directory}")
    return path
