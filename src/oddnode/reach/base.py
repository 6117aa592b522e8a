"""The transport interface, its result type and the registry."""

from __future__ import annotations

import base64
import binascii
import enum
import signal
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from oddnode.core.nodes import fold
from oddnode.core.registry import Registry, UnknownNameError


class NodeStatus(str, enum.Enum):
    """How a command ended on one node."""

    OK = "ok"  # ran and exited 0
    FAILED = "failed"  # ran and exited non-zero
    UNREACHABLE = "unreachable"  # could not connect or start it
    TIMEOUT = "timeout"  # cut at the command timeout


@dataclass(frozen=True)
class NodeResult:
    """What one node gave back."""

    node: str
    status: NodeStatus
    stdout: str
    stderr: str
    exit_code: int | None  # None when it never ran or was cut
    duration: float  # seconds, as seen by the transport

    @property
    def ok(self) -> bool:
        return self.status is NodeStatus.OK


class TransportError(RuntimeError):
    """A transport that cannot be used as asked (not in an allocation, no srun...)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, stopping oddnode the way Ctrl-C does: each transport ends
    what it runs on the nodes as the exception passes through it."""

    signum = signal.SIGTERM


def interrupt_status(interrupt: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by ``interrupt``: 130 after
    SIGINT (Ctrl-C), 143 after SIGTERM, as a shell reports a signal."""
    return 128 + int(getattr(interrupt, "signum", signal.SIGINT))


class Transport(Protocol):
    """Runs one argv on every node of a set, concurrently; or each node its
    own argv, all at once (a pair's server on one node, its client on the
    other)."""

    name: str

    def run(self, nodes: Sequence[str], argv: Sequence[str], *, timeout: float) -> dict[str, NodeResult]:
        """Every requested node gets a result, whatever happened to it."""
        ...

    def run_each(self, commands: Mapping[str, Sequence[str]], *, timeout: float) -> dict[str, NodeResult]:
        """``commands[node]`` on each node, all started together; every node
        gets a result, whatever happened to it."""
        ...




@dataclass(frozen=True)
class Target:
    """Which nodes a check runs on, and the transport that reaches them."""

    nodes: list[str]
    transport: Transport

    @property
    def nodeset(self) -> str:
        return fold(self.nodes)


class UnknownTransportError(UnknownNameError):
    """A transport name that none was registered under."""


# name -> the factory of the transport, taking its options
TRANSPORTS: Registry[Callable[..., Transport]] = Registry("transport", UnknownTransportError)


def register_transport(name: str) -> Callable[[Callable[..., Transport]], Callable[..., Transport]]:
    """Class decorator: make a transport available by name."""
    return TRANSPORTS.register(name)


def transports() -> list[str]:
    return sorted(TRANSPORTS)


def get_transport(name: str, **options: Any) -> Transport:
    """A transport by name, with its options (ssh_config, fanout, ...)."""
    return TRANSPORTS.get(name)(**options)


def pack_text(text: str) -> str:
    """Text as one shell-safe word: zlib-compressed, then base64.  Our
    scripts and jobs travel inside the command line, which a remote shell
    takes up to 128 KiB long; compressed, a kernel's job with its source is
    a quarter of its size."""
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def unpack_text(word: str) -> str:
    """The text pack_text packed; ValueError when the word is not such."""
    try:
        return zlib.decompress(base64.b64decode(word, validate=True)).decode("utf-8")
    except (binascii.Error, zlib.error, UnicodeDecodeError) as err:
        raise ValueError(f"not a packed text: {err}") from None
