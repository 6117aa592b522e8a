"""How a command reaches its nodes, as one typed value: the transport and
ssh's settings (``--transport``, ``--ssh-config``, ``--fanout``, ``-l``,
``--connect-timeout``), with their defaults in this one place.

A field left None takes, in order: the configuration files' key
(``oddnode config show`` says which file), clush.conf's [Main] setting,
then the default here.  The command line fills the first; the ssh
transport the other two (``oddnode.reach.targets.reach`` makes the target).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_FANOUT = 64  # ssh connections at once
DEFAULT_CONNECT_TIMEOUT = 10  # seconds ssh may take to connect; ClusterShell's own is 15


@dataclass(frozen=True)
class Connection:
    """The transport (None: the default for the nodes, see
    ``oddnode.reach.targets.default_transport``) and, for ssh, its client
    configuration file, fan-out, remote user and connect timeout."""

    transport: str | None = None
    ssh_config: Path | None = None
    fanout: int | None = None
    user: str | None = None
    connect_timeout: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: str(value) if isinstance(value, Path) else value for name, value in asdict(self).items()}
