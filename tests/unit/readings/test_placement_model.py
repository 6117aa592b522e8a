"""The placement model's arithmetic: which calls it predicts and at which
sizes, the prediction per placement, the candidate placements, and the
placement-sensitive rule on scripted predictions (a fault each way, none)."""

from __future__ import annotations

import numpy as np
import pytest

from oddnode.findings import Sensitivity, find_all
from oddnode.findings.placement import PLACEMENT_ALPHA, placement_sensitive
from oddnode.core.model import Dataset, Direction, SetRuns, Severity
from oddnode.readings.profile import ZERO_BUCKET, CallStats, size_bucket
from oddnode.readings.placement import (
    Point,
    predict,
    predictions_by_repetition,
    rank_placements,
    representative_size,
    select,
)
from oddnode.readings.placement import candidates, prediction_metric
from support.placement import profile_of


# --- sizes and selection -------------------------------------------------------------


def test_a_bucket_is_measured_at_its_calls_mean_size_within_the_bucket():
    # 100 calls of 35,000 B: bucket [32K, 64K), measured at 35,000 B.
    assert representative_size("alltoall", size_bucket(35000), CallStats(100, 1.0, 0.1, 3_500_000)) == 35000
    # Without bytes: the bucket's lower bound; a zero bucket: 0 B.
    assert representative_size("sendrecv", 10, CallStats(5, 1.0, 0.5, 0)) == 1024
    assert representative_size("sendrecv", ZERO_BUCKET, CallStats(5, 1.0, 0.5, 0)) == 0
    # Allreduce rounds down to whole doubles, and to at least one.
    assert representative_size("allreduce", size_bucket(1001), CallStats(1, 1.0, 1.0, 1001)) == 1000
    assert representative_size("allreduce", 1, CallStats(1, 1.0, 1.0, 3)) == 8
    # A barrier needs no size; an unrecorded size cannot be measured.
    assert representative_size("barrier", None, CallStats(1, 1.0, 1.0, 0)) == 0
    assert representative_size("alltoall", None, CallStats(1, 1.0, 1.0, 0)) is None


def test_the_cells_holding_most_time_are_chosen_until_the_coverage():
    # Per rank: Alltoall at 32 KiB 6 s, at 8 B 3 s, Allreduce 8 B 0.6 s, Wait 5 s, Gather 0.4 s.
    profile = profile_of({("MPI_Alltoall", 15): (100, 6.0, 100 * 32768), ("MPI_Alltoall", 3): (1000, 3.0, 8000),
                          ("MPI_Allreduce", 3): (50, 0.6, 400), ("MPI_Wait", None): (10, 5.0, 0),
                          ("MPI_Gather", 5): (3, 0.4, 96), ("MPI_Init", None): (1, 30.0, 0)})
    selection = select(profile, coverage=0.9)
    chosen = [(c.call, c.bucket) for c in selection.chosen]
    # 6 + 3 = 9 of the 9.6 s a benchmark stands for: 93.75% >= 90%.
    assert chosen == [("MPI_Alltoall", 15), ("MPI_Alltoall", 3)]
    assert selection.points == [Point("alltoall", 8), Point("alltoall", 32768)]
    assert selection.ranks == 4 and selection.chosen[0].calls_per_rank == 100
    why = {c.call: c.why_not for c in selection.left}
    assert why["MPI_Wait"] == "completes calls predicted elsewhere"
    assert why["MPI_Gather"] == "no benchmark stands for it"
    assert why["MPI_Allreduce"] is None  # predictable, past the coverage
    assert selection.coverage == pytest.approx(9.0 / 15.0)
    assert selection.profiled_time() == pytest.approx(9.0)
    # Everything a benchmark stands for, with full coverage and room.
    assert len(select(profile, coverage=1.0).chosen) == 3
    # At most one point: the first cell's point only.
    assert select(profile, coverage=1.0, max_points=1).points == [Point("alltoall", 32768)]


def test_a_profile_the_model_cannot_use_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="2 or more|two or more"):
        select(profile_of({("MPI_Alltoall", 3): (1, 1.0, 8)}, ranks=1))
    with pytest.raises(ValueError, match="no time in calls a benchmark stands for"):
        select(profile_of({("MPI_Wait", None): (10, 5.0, 0)}))
    with pytest.raises(ValueError, match="coverage"):
        select(profile_of({("MPI_Alltoall", 3): (1, 1.0, 8)}), coverage=0)


def test_the_prediction_is_the_calls_per_rank_times_the_measured_time():
    profile = profile_of({("MPI_Alltoall", 15): (100, 6.0, 100 * 32768), ("MPI_Sendrecv", 10): (400, 1.0, 400 * 1024)})
    selection = select(profile, coverage=1.0)
    times = {Point("alltoall", 32768): 0.05, Point("sendrecv", 1024): 0.002}
    assert predict(selection, times) == pytest.approx(100 * 0.05 + 400 * 0.002)
    with pytest.raises(KeyError, match="sendrecv 1 KiB"):
        predict(selection, {Point("alltoall", 32768): 0.05})
    measured = {"packed": {1: times, 2: {**times, Point("alltoall", 32768): 0.01}, 3: {}},
                "striped": {1: {p: 2 * t for p, t in times.items()}}}
    predictions = predictions_by_repetition(selection, measured)
    assert predictions["packed"] == {1: pytest.approx(5.8), 2: pytest.approx(1.8)}  # repetition 3 measured nothing
    verdict = rank_placements(predictions)
    assert (verdict.best, verdict.worst) == ("packed", "striped")
    assert verdict.factor == pytest.approx(11.6 / 3.8)
    assert verdict.factor_against("striped") == pytest.approx(11.6 / 3.8)
    assert rank_placements({"packed": {1: 1.0}}) is None


# --- placements ------------------------------------------------------------------------


GROUPS = {**{f"cn-a{i:02d}": "r12-sw1" for i in range(1, 5)}, **{f"cn-b{i:02d}": "r12-sw2" for i in range(1, 5)},
          **{f"cn-c{i:02d}": "r13-sw1" for i in range(1, 5)}}
NODES = sorted(GROUPS)


def test_the_candidates_are_where_it_ran_packed_striped_and_shuffled():
    hosts = ["cn-b02", "cn-a01", "cn-c04", "cn-b03"]
    chosen, notes = candidates(NODES, 4, GROUPS, hosts, seed=3)
    by_name = {c.name: c for c in chosen}
    assert by_name["given"].members == tuple(hosts)
    assert by_name["packed"].members == ("cn-a01", "cn-a02", "cn-a03", "cn-a04")
    assert by_name["packed"].groups == ("r12-sw1",)
    assert by_name["striped"].members == ("cn-a01", "cn-b01", "cn-c01", "cn-a02")
    assert by_name["striped"].groups == ("r12-sw1", "r12-sw2", "r13-sw1")
    assert len(by_name["shuffled"].members) == 4 and notes == []
    # Hosts not among the nodes, no topology: said, not measured.
    chosen, notes = candidates(NODES, 4, {}, ["elsewhere1", "elsewhere2", "elsewhere3", "elsewhere4"])
    assert [c.name for c in chosen] == ["shuffled"]
    assert any(n.startswith("given:") for n in notes) and any(n.startswith("packed: needs a topology") for n in notes)
    # One group only: packed and striped choose the same nodes, measured once.
    chosen, notes = candidates(NODES[:4], 3, GROUPS, wanted=("packed", "striped"))
    assert [(c.name, c.aliases) for c in chosen] == [("packed", ("striped",))]
    assert "the same nodes as packed" in notes[0]
    # Where the job ran is the striped placement: striped keeps its name.
    chosen, notes = candidates(NODES, 4, GROUPS, ["cn-a01", "cn-b01", "cn-c01", "cn-a02"])
    assert [(c.name, c.aliases) for c in chosen] == [("striped", ("given",)), ("packed", ()), ("shuffled", ())]
    assert notes == ["given: the same nodes as striped (cn-a[01-02],cn-b01,cn-c01); measured once"]
    with pytest.raises(ValueError, match="only 4 given"):
        candidates(NODES[:4], 8, GROUPS)


# --- the rule ----------------------------------------------------------------------------


def prediction_runs(placement: str, members: str, values: list[float], profile_id: int = 7) -> SetRuns:
    return SetRuns(benchmark=f"model.prediction.{placement}", metric=prediction_metric(profile_id), unit="s",
                   direction=Direction.LOWER, labels=np.array([members] * len(values), dtype=object),
                   repetitions=np.arange(1, len(values) + 1), values=np.array(values, dtype=float))


def dataset_of(packed: list[float], striped: list[float]) -> Dataset:
    return Dataset(set_runs=[prediction_runs("packed", "cn-a[01-04]", packed),
                             prediction_runs("striped", "cn-a[01-02],cn-b01,cn-c01", striped)],
                   topology=GROUPS)


def test_packed_far_faster_than_striped_names_the_groups_between():
    findings = placement_sensitive(dataset_of([0.10, 0.11, 0.10, 0.12, 0.10], [0.31, 0.35, 0.30, 0.33, 0.36]),
                                   Sensitivity())
    assert len(findings) == 1
    f = findings[0]
    assert f.kind == "placement-sensitive" and f.severity is Severity.WARNING
    assert f.evidence["faster"] == "packed" and f.evidence["factor"] == pytest.approx(0.33 / 0.10)
    assert f.evidence["p"] == pytest.approx(2 / 252) and f.evidence["p"] <= PLACEMENT_ALPHA
    assert "links between the groups" in f.message and "r12-sw1+r12-sw2+r13-sw1" in f.message
    assert f.nodes == "cn-a[01-04],cn-b01,cn-c01"


def test_striped_faster_than_packed_blames_the_packed_group():
    findings = placement_sensitive(dataset_of([0.40, 0.42, 0.41, 0.45, 0.40], [0.20, 0.21, 0.19, 0.22, 0.20]),
                                   Sensitivity())
    assert [f.evidence["faster"] for f in findings] == ["striped"]
    assert "inside a group" in findings[0].message and "r12-sw1" in findings[0].message
    assert "Spread" in findings[0].remedy


def test_no_finding_within_the_noise_or_with_too_few_repetitions():
    # Interleaved values: p far above alpha.
    assert placement_sensitive(dataset_of([0.10, 0.12, 0.11, 0.13, 0.10], [0.11, 0.10, 0.12, 0.11, 0.13]),
                               Sensitivity()) == []
    # Separated but only 15% apart: below the minimum effect.
    assert placement_sensitive(dataset_of([1.00, 1.01, 1.00, 1.02, 1.01], [1.15, 1.16, 1.15, 1.17, 1.16]),
                               Sensitivity()) == []
    # 25% apart: information for the scheduler, not a warning.
    (info,) = placement_sensitive(dataset_of([1.00, 1.01, 1.00, 1.02, 1.01], [1.25, 1.26, 1.25, 1.27, 1.26]),
                                  Sensitivity())
    assert info.severity is Severity.INFO
    # Three repetitions each cannot reach alpha (p >= 0.1), however far apart.
    assert placement_sensitive(dataset_of([0.1, 0.1, 0.1], [0.9, 0.9, 0.9]), Sensitivity()) == []
    # Only one of the two placements measured.
    only = Dataset(set_runs=[prediction_runs("packed", "cn-a[01-04]", [0.1] * 5)], topology=GROUPS)
    assert placement_sensitive(only, Sensitivity()) == []


def test_the_rule_runs_with_every_other_rule_and_stays_quiet_on_a_healthy_model():
    healthy = dataset_of([0.10, 0.12, 0.11, 0.13, 0.10], [0.11, 0.10, 0.12, 0.11, 0.13])
    assert [f for f in find_all(healthy, Sensitivity()) if f.kind == "placement-sensitive"] == []
    faulty = dataset_of([0.10, 0.11, 0.10, 0.12, 0.10], [0.31, 0.35, 0.30, 0.33, 0.36])
    assert [f.kind for f in find_all(faulty, Sensitivity()) if f.kind == "placement-sensitive"] == \
        ["placement-sensitive"]
