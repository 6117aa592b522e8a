"""The floor plan: oddnode's packages in layers, top to bottom.

A package imports only packages in layers below its own; packages that
share a layer are independent and import neither each other.  The unit
tier checks the rule on every import of ``src/oddnode`` (lazy imports
inside functions included, ``TYPE_CHECKING`` imports aside), and
docs/architecture.md shows :func:`render`'s drawing of this list.
"""

from __future__ import annotations

LAYERS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("testbed", "a virtual cluster of network namespaces, for the demo and the tests"),),
    (("app", "the command line, the main check, the node's health check, synthetic datasets"),),
    (("report", "terminal, HTML, JSON, JUnit, Prometheus and figures"),),
    (("judge", "the analysis of a store, compare, the reading of a sweep"),
     ("measure", "steps, the round runner, plan and catalog; node/ pair/ set/ collect/ profile/ runs")),
    (("reach", "transports (local, ssh, slurm), shipping scripts, kernel jobs, MPI launch lines"),
     ("store", "the DuckDB results store, STAB files and tool outputs in, exports out")),
    (("parsers", "every tool's output read into measurements, ours included"),),
    (("findings", "the rules: findings with evidence and remedy, problems, expectations"),),
    (("readings", "pure readings of stored results and the names of every series"),),
    (("stats", "robust statistics, distributions, outlier tests, correlation"),),
    (("core", "model, node names and sets, order, units, registries, configuration, inputs, outputs"),),
    (("onnode", "what runs on a node: standard library only, imports nothing of ours"),
     ("kernels", "our C kernels and headers: data only")),
)

# Packages that run on the nodes, where only the standard library is found.
STANDARD_LIBRARY_ONLY = ("onnode",)


def rank() -> dict[str, int]:
    """Every package's layer, 0 at the bottom."""
    return {name: len(LAYERS) - 1 - depth for depth, layer in enumerate(LAYERS) for name, _ in layer}


def render() -> str:
    """The layers as text, top first: one row per package, the packages that
    share a layer joined by ``|`` in the margin."""
    width = max(len(name) for layer in LAYERS for name, _ in layer)
    rows = []
    for layer in LAYERS:
        for index, (name, purpose) in enumerate(layer):
            mark = " " if len(layer) == 1 else "┬" if index == 0 else "┴" if index == len(layer) - 1 else "│"
            rows.append(f"{mark} {name:<{width}}  {purpose}")
    return "\n".join(rows)
