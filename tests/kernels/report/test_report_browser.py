"""The HTML report as a person sees it: rendered by headless Chromium."""

from __future__ import annotations


import numpy as np
import pytest

from oddnode.judge.analysis import analyze
from oddnode.store.stab import import_stab
from oddnode.report.html import write_report
from oddnode.store import open_store
from oddnode.app.synth import generate
from support.browser import CHROMIUM, chromium

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")

NOT_READY_BACKGROUND = np.array([0xFD, 0xE2, 0xE1]) / 255  # .not-ready in the report's style


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    generate(root / "cluster", nodes=120)
    with open_store(root / "s.duckdb") as store:
        import_stab(store, [root / "cluster"])
        analysis = analyze(store.load_dataset())
    return write_report(analysis, root / "report.html"), analysis


def test_rendered_page_has_every_section_and_figure(report, tmp_path):
    path, analysis = report
    dom = chromium("--dump-dom", path.as_uri(), profile=tmp_path / "profile").stdout
    for section in ("verdict", "findings", "statistics", "distributions", "correlations", "failures", "inventory"):
        assert f'id="{section}"' in dom, section
    assert dom.count("<svg") >= len(analysis.statistics)  # a histogram per benchmark, then scatter plots
    assert "NOT READY for production" in dom


def test_screenshot_shows_the_verdict(report, tmp_path):
    path, _ = report
    shot = tmp_path / "report.png"
    chromium("--window-size=1200,900", f"--screenshot={shot}", path.as_uri(), profile=tmp_path / "profile")
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (900, 1200)
    assert pixels.std() > 0.05  # not a blank page
    top = pixels[:300].reshape(-1, 3)
    assert (np.abs(top - NOT_READY_BACKGROUND).max(axis=1) < 0.02).sum() > 2000  # the red NOT READY box


def test_a_checks_report_renders_a_section_per_stage(tmp_path):
    from oddnode.app.check import CheckPlan, run_check
    from oddnode.reach.base import Target
    from support.clusters.check import MEMORY_ONLY, NODES, ScriptedCluster

    with open_store(tmp_path / "check.duckdb") as store:
        result = run_check(store, Target(NODES, ScriptedCluster(speed={"node03": 0.5})),
                           CheckPlan(stages=("memory",), repetitions=3, parameters=MEMORY_ONLY))
    path = write_report(result.analysis, tmp_path / "check.html", result)
    dom = chromium("--dump-dom", path.as_uri(), profile=tmp_path / "profile").stdout
    for section in ("verdict", "stages", "stage-diagnostics", "stage-memory", "findings"):
        assert f'id="{section}"' in dom, section
    memory = dom[dom.index('id="stage-memory"'):dom.index('id="findings"')]
    assert memory.count("<svg") == 4  # copy, scale, add, triad
    assert memory.count('class="num flagged"') >= 1 and "node03" in memory


def test_interconnect_section_only_with_pair_data(report, tmp_path):
    """No pair results: no interconnect section; a matrix, bisection and pair
    patterns: tables and heatmaps, as Chromium renders them."""
    from support.clusters.bisection import OPTIONS as STREAM_OPTIONS
    from support.clusters.bisection import BisectionCluster as SwitchCluster
    from support.clusters.matrix import MatrixCluster
    from support.clusters.pairs import NODES, OPTIONS, PairCluster

    from oddnode.measure.pair.bisection import run_bisection
    from oddnode.measure.pair.matrix import run_matrix
    from oddnode.measure.pair.pairs import run_pairs
    from oddnode.reach.base import Target

    path, _ = report
    assert 'id="interconnect"' not in chromium("--dump-dom", path.as_uri(), profile=tmp_path / "p1").stdout
    with open_store(tmp_path / "i.duckdb") as store:
        run_matrix(store, Target(NODES, MatrixCluster(bad=[("node02", "node05")])), options=OPTIONS)
        run_bisection(store, Target(NODES, SwitchCluster()), 1, options=STREAM_OPTIONS)
        for pattern in ("sort", "shuffle"):
            run_pairs(store, Target(NODES, PairCluster()), pattern, 1, options=OPTIONS)
        analysis = analyze(store.load_dataset())
    dom = chromium("--dump-dom", write_report(analysis, tmp_path / "i.html").as_uri(), profile=tmp_path / "p2").stdout
    for section in ("interconnect", "pair-patterns", "pattern-pingpong.sort", "pattern-pingpong.matrix",
                    "sorted-shuffled", "bisection", "matrix"):
        assert f'id="{section}"' in dom, section
    assert 'id="switch-benchmarks"' not in dom  # no Switchbench data, no section
    assert dom.count('class="figure heatmap"') == 2 and "node02-node05" in dom
