"""The nodes a command runs on, reached as a :class:`Connection` says."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from oddnode.core.connection import Connection
from oddnode.core.nodes import NodeNameError
from oddnode.reach.base import Target, get_transport


def reach(connection: Connection, nodes: Sequence[str], environ: Mapping[str, str] = os.environ) -> Target:
    """The nodes reached this way: those named, else the allocation's
    (slurm) or this machine (local).  ssh reads clush.conf for what the
    connection leaves unset."""
    name = connection.transport or default_transport(nodes, environ)
    options: dict[str, object] = {}
    if name == "ssh":
        from oddnode.reach.ssh import read_clush_conf

        options = {"ssh_config": connection.ssh_config, "fanout": connection.fanout, "user": connection.user,
                   "connect_timeout": connection.connect_timeout, "clush": read_clush_conf()}
    chosen = get_transport(name, **options)
    if not nodes:
        if name == "local":
            from oddnode.reach.local import local_node_name

            nodes = [local_node_name()]
        elif name == "slurm":
            from oddnode.reach.slurm import allocation_nodes

            nodes = allocation_nodes(environ)
        else:
            raise NodeNameError(f"the {name} transport needs nodes: give -w NODES or --hostfile FILE")
    return Target(nodes=list(nodes), transport=chosen)


def default_transport(nodes: Sequence[str], environ: Mapping[str, str] = os.environ) -> str:
    """The transport when none is asked: inside a Slurm allocation, slurm for
    the allocation or nodes all in it (srun reaches only those, and runs in
    the job's cgroups and accounting, as the site's jobs do); ssh for named
    nodes otherwise (srun cannot reach a node outside the allocation); local
    with no nodes outside an allocation."""
    if environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST"):
        from oddnode.reach.slurm import allocation_nodes

        if not nodes or set(nodes) <= set(allocation_nodes(environ)):
            return "slurm"
    return "ssh" if nodes else "local"
