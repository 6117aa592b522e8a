"""The state file: everything a testbed created, written before or as it is created.

``state.json`` is replaced atomically (write a temporary file, rename it over
the old one), so a reader or a crash never sees half of it. No fsync: the
objects it names (namespaces, links, processes, mounts on tmpfs) do not
survive a power loss either.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from oddnode.core.nodes import fold
from oddnode.testbed._system import TestbedError, alive

STATE_FILE = "state.json"
LOCK_FILE = ".lock"
SCHEMA_VERSION = 1
LOCK_WAIT_S = 60.0

State = dict[str, Any]


def state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def read_state(state_dir: Path) -> State | None:
    try:
        text = state_path(state_dir).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as err:
        raise TestbedError(f"{state_path(state_dir)} is not a testbed state file: {err}") from None
    if state.get("schema") != SCHEMA_VERSION:
        raise TestbedError(f"{state_path(state_dir)} has state schema {state.get('schema')!r}, "
                           f"this oddnode reads {SCHEMA_VERSION}")
    return state


def write_state(state_dir: Path, state: State) -> None:
    path = state_path(state_dir)
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


@contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Hold the testbed's lock: one command at a time changes a testbed."""
    fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TestbedError(f"another oddnode testbed command holds {state_dir} "
                                       f"(waited {LOCK_WAIT_S:g} s)") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def require_state(state_dir: Path) -> State:
    state = read_state(state_dir)
    if state is None:
        raise TestbedError(f"no testbed is up in {state_dir} (start one with `oddnode testbed up`)")
    return state


def node_entry(state: State, node: str) -> dict[str, Any]:
    try:
        return state["nodes"][node]
    except KeyError:
        raise TestbedError(f"unknown node {node!r}: the testbed has {fold(state['nodes'])}") from None


def require_running(state: State, node: str) -> dict[str, int]:
    """The record of a node's init (PID 1 of its namespaces), which must be running."""
    init = node_entry(state, node).get("init")
    if not alive(init):
        raise TestbedError(f"{node} is not running (its init is gone): `oddnode testbed down` "
                           "then `oddnode testbed up`")
    return init
