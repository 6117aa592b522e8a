"""A Slurm for tests of draining and resuming: a scontrol on PATH that
prints ``scontrol show node`` records and applies ``scontrol update`` to
nodes kept in a JSON file (each update also logged beside it)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

FAKE_SCONTROL = textwrap.dedent("""\
    #!{python}
    import json, sys
    path = {state!r}
    nodes = json.load(open(path))
    args = sys.argv[1:]
    if args[:2] == ["show", "node"]:
        node = nodes.get(args[2])
        if node is None:
            print(f"Node {{args[2]}} not found", file=sys.stderr); sys.exit(1)
        print(f"NodeName={{args[2]}} Arch=x86_64 CoresPerSocket=16\\n   CPUAlloc={{node['alloc']}} CPUTot=64\\n"
              f"   NodeAddr=127.0.0.1 NodeHostName={{args[2]}} Version=22.05.8\\n   State={{node['state']}} "
              f"ThreadsPerCore=1\\n   Partitions=batch\\n"
              + (f"   Reason={{node['reason']}} [{{node['user']}}@2026-11-26T09:00:00]\\n" if node['reason'] else ""))
    elif args[0] == "update":
        fields = dict(word.split("=", 1) for word in args[1:])
        node = nodes[fields["NodeName"]]
        if fields["State"] == "DRAIN":
            node.update(state=node["state"].split("+")[0] + "+DRAIN", reason=fields["Reason"], user="root")
        elif fields["State"] == "RESUME":
            node.update(state=node["state"].split("+")[0], reason="", user="")
        json.dump(nodes, open(path, "w"))
        open(path + ".log", "a").write(" ".join(args) + "\\n")
    """)


def fake_slurm(tmp_path: Path, monkeypatch, nodes) -> Path:
    """A scontrol on PATH (ahead of the interpreter's directory and /usr/bin)
    knowing ``nodes``, all idle; returns the file their states live in."""
    state = tmp_path / "nodes.json"
    state.write_text(json.dumps({name: {"state": "IDLE", "alloc": 0, "reason": "", "user": ""} for name in nodes}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(FAKE_SCONTROL.format(python=sys.executable, state=str(state)))
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    return state


def nodes_of(state: Path) -> dict:
    return json.loads(state.read_text())
