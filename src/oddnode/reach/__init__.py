"""Run a fixed command on a set of nodes and get back, per node, its output,
exit code and duration, or why it could not run.

Transports are registered by name (``local``, ``ssh``, ``slurm``); importing
this package registers them all.
"""

from oddnode.reach import local, slurm, ssh  # noqa: F401  (importing registers them)
from oddnode.reach.base import (
    NodeResult,
    NodeStatus,
    Target,
    Transport,
    TransportError,
    UnknownTransportError,
    get_transport,
    register_transport,
    transports,
)
from oddnode.reach.scripts import python_command

__all__ = [
    "NodeResult",
    "NodeStatus",
    "Target",
    "Transport",
    "TransportError",
    "UnknownTransportError",
    "get_transport",
    "python_command",
    "register_transport",
    "transports",
]
