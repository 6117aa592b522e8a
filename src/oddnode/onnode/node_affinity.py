"""oddnode's affinity sampler: runs ON a node and prints one JSON object,
the node's topology and, when processes are asked for, where they may
run, where they ran over the interval and where their memory lives.

Standard library only, for Python >= 3.6; it travels in the command line
with the modules it imports (``oddnode.measure.collect.affinity``).  Read-only.

Output: {"affinity_version": 1, "hostname": str, "topology": {...}
(oddnode.onnode.cpu_topology), "selection": {...}, "processes": [...]
(oddnode.onnode.affinity_sampler), "cpu_busy": {cpu: fraction}, "seconds":
window, "samples": n, "notes": [str]}.  Exit 2 on bad arguments, 1 when
no topology can be read.
"""

import argparse
import json
import socket
import sys

from oddnode.onnode.affinity_sampler import SelectionError, sample, select_pids
from oddnode.onnode.cpu_topology import SYSFS, TopologyError, read_topology

AFFINITY_VERSION = 1
# Seconds of sampling by default: a hundred samples, enough to see a rank
# that the scheduler moves a few times a second.
DEFAULT_SECONDS = 2.0


def _pids(text):
    try:
        pids = [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("PIDs are whole numbers separated by commas, not %r" % text)
    if not pids or min(pids) <= 0:
        raise argparse.ArgumentTypeError("PIDs are whole numbers > 0, not %r" % text)
    return pids


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError("--seconds must be a number > 0, not %r" % text)
    return value


def parser():
    out = argparse.ArgumentParser(prog="oddnode affinity sampler")
    which = out.add_mutually_exclusive_group()
    which.add_argument("--pid", type=_pids, help="PIDs, comma-separated")
    which.add_argument("--command", help="every process of this command name (comm)")
    which.add_argument("--slurm-job", help="the job's processes on this node (scontrol listpids)")
    out.add_argument("--seconds", type=_seconds, default=DEFAULT_SECONDS)
    out.add_argument("--sysfs", default=SYSFS, help="sysfs root to read the topology from")
    out.add_argument("--proc", default="/proc")
    out.add_argument("--no-hwloc", action="store_true", help="do not run lstopo")
    return out


def run(arguments):
    """The report as a dict."""
    notes = []
    topology = read_topology(arguments.sysfs, notes, hwloc=not arguments.no_hwloc)
    selection = {"pid": arguments.pid, "command": arguments.command, "slurm_job": arguments.slurm_job}
    asked = any(value for value in selection.values())
    pids = select_pids(arguments.pid, arguments.command, arguments.slurm_job, arguments.proc, notes)
    processes, cpu_busy, window, taken = [], {}, 0.0, 0
    if pids:
        processes, cpu_busy, window, taken = sample(pids, arguments.seconds, arguments.proc)
    try:
        hostname = socket.gethostname()
    except Exception:
        hostname = ""
    return {
        "affinity_version": AFFINITY_VERSION,
        "hostname": hostname,
        "topology": topology,
        "selection": dict((key, value) for key, value in selection.items() if value) if asked else {},
        "processes": processes,
        "cpu_busy": dict((str(cpu), busy) for cpu, busy in sorted(cpu_busy.items())),
        "seconds": round(window, 4),
        "samples": taken,
        "notes": notes,
    }


def main(argv=None):
    arguments = parser().parse_args(argv)
    try:
        report = run(arguments)
    except (TopologyError, SelectionError) as err:
        sys.stderr.write("oddnode affinity: %s\n" % err)
        return 1
    sys.stdout.write(json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0
