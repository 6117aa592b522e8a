"""The scripts we ship to the nodes travel inside the argv the same way:
``python3 -E -S -c LOADER``, the loader unpacking the script's text; a lone
script (the inventory probe, the node runner) travels as its file's own
text, a script with modules of ours bundled with them."""

from __future__ import annotations

import base64
import re
import zlib
from importlib import resources

from oddnode.measure.collect.accounting import collector_argv
from oddnode.measure.collect.affinity import sampler_argv
from oddnode.measure.collect.inventory import probe_argv
from oddnode.measure.profile.profiler import profiler_job
from oddnode.reach.base import unpack_text
from oddnode.reach.jobs import runner_argv, tool_argv, tool_or_kernel_argv

_LOADER = re.compile(r"import base64,zlib;exec\(compile\(zlib\.decompress\(base64\.b64decode\('([A-Za-z0-9+/=]+)'\)\),"
                     r"'<oddnode probe>','exec'\)\)")


def shipped(argv: list[str], interpreter: str = "python3") -> str:
    """The script an argv runs on a node."""
    assert argv[:4] == [interpreter, "-E", "-S", "-c"]
    loader = _LOADER.fullmatch(argv[4])
    assert loader is not None
    return zlib.decompress(base64.b64decode(loader[1])).decode("utf-8")


def onnode_text(name: str) -> str:
    return resources.files("oddnode.onnode").joinpath(f"{name}.py").read_text(encoding="utf-8")


def test_the_probe_and_the_runner_travel_as_their_files():
    assert shipped(probe_argv("python3.6")[:5], "python3.6") == onnode_text("node_probe")
    argv = runner_argv("memory", ["-n", "1"])
    assert len(argv) == 6 and shipped(argv) == onnode_text("node_runner")
    assert shipped(profiler_job()) == onnode_text("node_runner")


def test_the_disk_job_ships_the_runner_to_the_node_that_chooses():
    tool, kernel = tool_argv("fio", ["x"]), runner_argv("disk", ["y"])
    argv = tool_or_kernel_argv(tool, kernel)
    assert "shutil.which(tool)" in shipped(argv[:5])
    assert unpack_text(argv[5]) == onnode_text("node_runner") and argv[6:] == [tool[-1], kernel[-1]]


def test_the_collectors_travel_with_the_modules_they_import():
    accounting = shipped(collector_argv(5))
    for name in ("node_probe", "pacct", "proc_sampler", "accounting_collector"):
        assert repr(onnode_text(name)) in accounting
    assert "_ENTRY = 'oddnode.onnode.accounting_collector'" in accounting
    affinity = shipped(sampler_argv(pids=[1], seconds=2))
    for name in ("node_probe", "cpu_topology", "affinity_sampler", "node_affinity"):
        assert repr(onnode_text(name)) in affinity
    assert "_ENTRY = 'oddnode.onnode.node_affinity'" in affinity
