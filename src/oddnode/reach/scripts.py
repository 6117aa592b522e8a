"""Our own Python scripts on the nodes, shipped one way: the text of a
script of ``oddnode.onnode`` (alone, or bundled with the modules of ours it
imports), the argv that runs such a text on a node with nothing copied
there first, and the sorting of what every node answered into reports,
unreachable and failed nodes, each with its reason in one line (the
inventory probe, the accounting collector, the affinity sampler; the node
runner of kernel jobs travels the same way, see reach/jobs.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from typing import Generic, TypeVar

from oddnode.core.inputs import NodeOutputError
from oddnode.reach.base import NodeResult, NodeStatus, pack_text

Report = TypeVar("Report")
# The package of the scripts that run on nodes (standard library only).
ONNODE = "oddnode.onnode"
# A shell's exit status when the command (here python3) is not there.
COMMAND_NOT_FOUND = 127

# Run on the node before the bundled modules: each module is made under its
# dotted name (its packages as empty namespaces), in order, so that the
# modules import one another as they do here; then the entry module's main.
_BUNDLE_LOADER = '''
import sys, types
for _package, _name, _source in _SOURCES:
    _parts = _package.split(".")
    for _depth in range(1, len(_parts) + 1):
        _prefix = ".".join(_parts[:_depth])
        if _prefix not in sys.modules:
            _module = types.ModuleType(_prefix)
            _module.__path__ = []
            sys.modules[_prefix] = _module
    _module = types.ModuleType(_package + "." + _name)
    _module.__file__ = "<oddnode " + _package + "." + _name + ">"
    sys.modules[_module.__name__] = _module
    setattr(sys.modules[_package], _name, _module)
    exec(compile(_source, _module.__file__, "exec"), _module.__dict__)
sys.exit(sys.modules[_ENTRY].main(sys.argv[1:]))
'''


def onnode_source(name: str) -> str:
    """The text of one module of ``oddnode.onnode``, as shipped in the package."""
    return resources.files(ONNODE).joinpath(f"{name}.py").read_text(encoding="utf-8")


def onnode_script(*modules: str) -> str:
    """The text of a script of ours that runs on a node where oddnode is not
    installed, from modules of ``oddnode.onnode`` named in load order: one
    module travels as its file's own text (it runs as ``__main__``);
    several (each importing only those before it) as one script that
    makes each under its dotted name and runs the last one's
    ``main(argv)``.  Either way the files that run there are the ones the
    tests import here."""
    if not modules:
        raise ValueError("a script is made of one or more modules of oddnode.onnode")
    if len(modules) == 1:
        return onnode_source(modules[0])
    sources = [(ONNODE, name, onnode_source(name)) for name in modules]
    entry = f"{ONNODE}.{modules[-1]}"
    return f"_SOURCES = {sources!r}\n_ENTRY = {entry!r}\n{_BUNDLE_LOADER}"


def python_command(script: str, interpreter: str = "python3") -> list[str]:
    """An argv that runs a Python script of ours (onnode_script's, or
    another text) on a node without copying a file.

    The script travels packed (pack_text) inside the argv, so no quoting of
    its text can go wrong in a remote shell, and nothing a user typed is in
    it.  ``-E -S``: the node's PYTHON* variables and site-packages can
    neither change what the script does nor slow its start.
    """
    loader = (f"import base64,zlib;exec(compile(zlib.decompress(base64.b64decode('{pack_text(script)}')),"
              "'<oddnode probe>','exec'))")
    return [interpreter, "-E", "-S", "-c", loader]


@dataclass
class ScriptResults(Generic[Report]):
    """The reports of the nodes that answered, and the others with their
    results; ``reasons`` says for every node in ``unreachable`` or
    ``failed`` why, in one line: one bad node costs only itself."""

    reports: dict[str, Report] = field(default_factory=dict)
    unreachable: dict[str, NodeResult] = field(default_factory=dict)
    failed: dict[str, NodeResult] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def statuses(self) -> list[tuple[str, str, str | None]]:
        """How each node fared, as the store's node status records it:
        (node, status, why); a node that answered with an unusable report
        failed, whatever its transport said."""
        troubled = {**self.unreachable, **self.failed}
        return [(node, "ok", None) for node in self.reports] + [
            (node, "failed" if result.ok else result.status.value, self.reasons.get(node))
            for node, result in sorted(troubled.items())]


def failure_reason(result: NodeResult, timeout: float, script: str, prefix: str = "") -> str:
    """Why the script (its name: "probe", "collector") gave no report on a
    node, from its result: the last line it wrote to stderr (less
    ``prefix``), which says it best, else its exit status."""
    stderr = result.stderr.strip().splitlines()
    last = stderr[-1].removeprefix(prefix) if stderr else ""
    if result.status is NodeStatus.UNREACHABLE:
        return f"unreachable: {last}" if last else "unreachable"
    if result.status is NodeStatus.TIMEOUT:
        return f"the {script} was cut after {timeout:g} s"
    if result.exit_code == COMMAND_NOT_FOUND:
        return f"no python3 on the node (exit {COMMAND_NOT_FOUND}){': ' + last if last else ''}"
    return last or f"the {script} exited {result.exit_code}"


def sort_results(out: ScriptResults[Report], results: dict[str, NodeResult], nodes: Iterable[str], timeout: float,
                 parse: Callable[[str, str], Report], script: str, prefix: str = "") -> ScriptResults[Report]:
    """Sort a transport's results into ``out``: ``parse(node, stdout)``
    makes a report or raises NodeOutputError.  A requested node the
    transport gave no result for counts as unreachable rather than vanishing."""
    for node in nodes:
        result = results.get(node) or NodeResult(node, NodeStatus.UNREACHABLE, "",
                                                 "the transport returned no result", None, 0.0)
        if result.status is NodeStatus.UNREACHABLE:
            out.unreachable[node] = result
            out.reasons[node] = failure_reason(result, timeout, script, prefix)
        elif not result.ok:
            out.failed[node] = result
            out.reasons[node] = failure_reason(result, timeout, script, prefix)
        else:
            try:
                out.reports[node] = parse(node, result.stdout)
            except NodeOutputError as err:
                out.failed[node] = result
                out.reasons[node] = err.problem
    return out
