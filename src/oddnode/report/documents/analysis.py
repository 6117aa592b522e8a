"""The documents of the analysis commands: ``analyze`` and ``check``, the
statistics commands (``stats``, ``dist``, ``findn``, ``correlate``,
``findc``, ``common``, ``fit``) and ``compare``."""

from __future__ import annotations

from typing import Annotated, Literal, get_type_hints

from pydantic import Field
from typing_extensions import NotRequired, TypeAliasType, TypedDict

from oddnode.report.documents.interconnect import PairPattern
from oddnode.report.documents.nodes import Affinity, Numa, Processes, Profile
from oddnode.report.documents.sets import Sweep, SyncResult
from oddnode.report.documents.shared import (Direction, Findings, LabelKind, NumberOrNull, Problem, RunEstimate,
                                             SeriesReference, SetTables, SlurmAction, StatisticsRow, StoredRun)

# The analysis' numa section is numa --json's numa, declared once with that
# document: its type is read from there, so the two cannot drift apart.
NumaSection = get_type_hints(Numa, include_extras=True)["numa"]
# Likewise the asymmetry tables of processes --json, and the sampler
# reports of affinity --json.
ProcessTables = get_type_hints(Processes, include_extras=True)["tables"]
AffinityNodes = get_type_hints(Affinity, include_extras=True)["nodes"]


class AffinitySection(TypedDict):
    """The stored affinity samples: each node's newest sampler report."""

    nodes: AffinityNodes


class NoisePeriod(TypedDict):
    period_ms: float
    share: Annotated[float, Field(description="its share of the lost time's spectral power (median)")]


class NoiseNode(TypedDict):
    """One node's OS noise: its best repetition's values and what its repetitions' spectra found."""

    lost_pct: Annotated[NumberOrNull, Field(description="% of the CPUs' time the OS took")]
    detour_rate: Annotated[NumberOrNull, Field(description="detours a second on one CPU")]
    detour_max_us: NumberOrNull
    period_ms: Annotated[NumberOrNull, Field(
        description="the dominant period of the lost time, found by half of the repetitions; null: none")]
    period_share: NumberOrNull
    periods: Annotated[list[NoisePeriod], Field(description="every recurring period, the strongest first")]
    detour_us: Annotated[NumberOrNull, Field(description="half of the lost time is in detours at least this long")]
    detour_median_us: NumberOrNull
    repetitions: int


class NoiseSection(TypedDict):
    """The noise step's results per node."""

    nodes: dict[str, NoiseNode]


class StoredPlacement(TypedDict):
    """One placement of a stored model: its nodes and its predictions."""

    name: Annotated[str, Field(description="given, packed, striped, shuffled, sorted")]
    aliases: Annotated[list[str], Field(description="the other placements that chose the same nodes")]
    members: list[str]
    groups: Annotated[list[str], Field(description="the topology groups its nodes hang from")]
    predictions_s: Annotated[dict[str, NumberOrNull], Field(
        description="repetition -> predicted seconds per rank in the predicted calls")]


class StoredModel(TypedDict):
    """A profile's placement model as the store holds it (oddnode model)."""

    profile_id: int | None
    metric: Annotated[str, Field(description="the series' metric: profile.<id>")]
    placements: list[StoredPlacement]
    best: Annotated[str | None, Field(description="the placement of the least median prediction")]
    factor: Annotated[NumberOrNull, Field(description="the worst placement's median over the best's")]
    medians_s: dict[str, NumberOrNull]


class ProcessesSection(TypedDict):
    """The stored accounting's asymmetry tables."""

    tables: Annotated[ProcessTables, Field(
        description="every node against the others, then (with a topology) every group against the others")]


class Sensitivity(TypedDict):
    """How sure and how large a difference must be to be reported."""

    alpha: Annotated[float, Field(description="the significance level")]
    min_effect: Annotated[float, Field(description="the smallest effect reported, relative")]


class SeriesStatistics(StatisticsRow):
    """A series' row, with what its labels name."""

    label_kind: LabelKind


class CorrelationRow(TypedDict):
    """Two series' correlation over the labels they share."""

    x: str
    y: str
    n: int
    pearson_r: NotRequired[NumberOrNull]
    pearson_p: NotRequired[NumberOrNull]
    spearman_r: NotRequired[NumberOrNull]
    spearman_p: NotRequired[NumberOrNull]


class Analysis(TypedDict):
    """An analysis: verdict, statistics, findings, problems"""

    schema_version: Annotated[int, Field(ge=1, description="the results store's schema version")]
    oddnode: Annotated[str, Field(description="the version of oddnode that wrote it")]
    ready: Annotated[bool, Field(
        description="No finding of warning severity or above (false when there was nothing to judge).")]
    verdict: NotRequired[Annotated[Literal["ready", "not ready", "no data"], Field(
        description="ready; not ready (a finding of warning severity or above); no data (nothing to judge: "
                    "no result, failed run or fact, the no-data finding).")]]
    sensitivity: Sensitivity
    statistics: list[SeriesStatistics]
    findings: Findings
    problems: list[Problem]
    correlations: list[CorrelationRow]
    estimate: NotRequired[Annotated[RunEstimate, Field(description="the check's estimate and budget (check only)")]]
    pairs: NotRequired[Annotated[list[PairPattern], Field(
        description="every pair pattern's table, when the store holds pair results")]]
    sets: NotRequired[Annotated[SetTables, Field(description="the node-set tables, when the store holds set runs")]]
    sync: NotRequired[Annotated[SyncResult, Field(description="the sync readings, when the store holds sync runs")]]
    noise: NotRequired[Annotated[NoiseSection, Field(description="per node, when the store holds noise results")]]
    processes: NotRequired[Annotated[ProcessesSection, Field(
        description="the asymmetry tables, when the store holds process accounting of two nodes or more")]]
    numa: NotRequired[Annotated[NumaSection, Field(
        description="every NUMA measure's matrices, when the store holds NUMA results (numa --json's numa)")]]
    affinity: NotRequired[Annotated[AffinitySection, Field(
        description="each node's newest affinity sample, when the store holds any (affinity --json's nodes)")]]
    sweeps: NotRequired[Annotated[list[Sweep], Field(
        description="every parameter sweep stored, judged as sweep --stored judges it (sweep --json's document)")]]
    profiles: NotRequired[Annotated[list[Profile], Field(
        description="every MPI profile stored, as profile --show ID --json prints it")]]
    models: NotRequired[Annotated[list[StoredModel], Field(
        description="every placement model stored (oddnode model): each placement's predictions")]]
    drain: NotRequired[Annotated[list[SlurmAction], Field(description="what was done to the nodes in Slurm")]]


class StatsRow(StatisticsRow):
    """One series' row of stats."""

    population: LabelKind


Stats = TypeAliasType("Stats", Annotated[list[StatsRow], Field(description="Descriptive statistics, one row per series")])


class HistogramRow(TypedDict):
    """One bin: its range, its count and the count the fitted normal expects there."""

    low: NumberOrNull
    high: NumberOrNull
    count: int
    expected: NotRequired[NumberOrNull]


class Histogram(TypedDict):
    """The histogram dist draws."""

    bins: Annotated[Annotated[int, Field(ge=1)] | Literal["auto", "whole"], Field(
        description="the bins asked for: a number, auto (√n bins) or whole (one bin per integer)")]
    rows: list[HistogramRow]
    mean: NotRequired[NumberOrNull]
    std: NotRequired[NumberOrNull]


class DistributionTest(TypedDict):
    """One test of the distribution: its statistic and p (null where the test has none)."""

    test: str
    statistic: NotRequired[NumberOrNull]
    p: NotRequired[NumberOrNull]
    reading: NotRequired[Annotated[str, Field(description="what the result says, in words")]]
    requested_bins: NotRequired[int]
    bins: NotRequired[int]
    dof: NotRequired[int]
    scale: NotRequired[NumberOrNull]
    critical_5pct: NotRequired[NumberOrNull]
    not_normal_5pct: NotRequired[bool | None]
    z: NotRequired[NumberOrNull]


class Dist(TypedDict):
    """One series' histogram and normality tests"""

    series: SeriesReference
    histogram: Histogram
    tests: list[DistributionTest]


class ChiSquaredFit(TypedDict):
    """One chi-squared fit to the normal: X², the bins asked for and used
    after merging sparse ones, degrees of freedom, bin width / std, p."""

    statistic: NumberOrNull
    p: NumberOrNull
    requested_bins: NotRequired[int]
    bins: NotRequired[int]
    dof: NotRequired[int]
    scale: NotRequired[NumberOrNull]


class Findn(TypedDict):
    """Fits of one series' distribution"""

    series: SeriesReference
    fits: Annotated[list[ChiSquaredFit], Field(description="one per bin count, least normal-looking first")]


class Coefficient(TypedDict):
    """A correlation coefficient and its p."""

    r: NumberOrNull
    p: NumberOrNull


class Correlation(TypedDict):
    """Two series' correlation and the line fitted through them."""

    x: str
    y: str
    n: int
    pearson: Coefficient
    spearman: Coefficient
    slope: NotRequired[NumberOrNull]
    intercept: NotRequired[NumberOrNull]


class JoinedPair(TypedDict):
    """One label's values in both series."""

    label: str
    x: NumberOrNull
    y: NumberOrNull


class Correlate(TypedDict):
    """Two series joined by node and their correlation"""

    x: SeriesReference
    y: SeriesReference
    correlation: Annotated[Correlation | None, Field(description="null when the series share too few labels")]
    pairs: list[JoinedPair]


class Findc(TypedDict):
    """The strongest correlations between series"""

    correlations: Annotated[list[Correlation], Field(description="strongest |r| first")]
    grep: Annotated[str | None, Field(description="the benchmark the pairs involve (--grep)")]
    limit: Annotated[int | None, Field(description="the rows asked for (--limit)")]
    total: Annotated[int, Field(description="how many pairs match, before the limit")]


class CommonNode(TypedDict):
    """A node and the failed runs it took part in."""

    node: str
    failed_runs: int


class FailedRun(TypedDict):
    """A failed run: its benchmark, label and the nodes it ran on."""

    benchmark: str
    label: str
    label_kind: LabelKind
    repetition: Annotated[int | None, Field(description="null when unknown")]
    nodes: Annotated[str, Field(description="folded")]


class Common(TypedDict):
    """Nodes common to failed runs"""

    version: int
    source: Annotated[list[str] | str, Field(
        description="the failed-run files read, or the store (text) without files")]
    failed_runs: Annotated[int, Field(description="how many failed runs were read")]
    nodes: Annotated[list[CommonNode], Field(description="most failed runs first")]
    runs: Annotated[list[FailedRun], Field(description="every failed run")]


class SizedTime(TypedDict):
    """One message size's one-way time: one label's, or the median over the labels."""

    size: Annotated[int, Field(ge=0, description="bytes")]
    time_us: float
    labels: Annotated[int, Field(ge=1, description="the labels behind the time")]


class FittedRow(TypedDict):
    """One measured point beside the line."""

    size: Annotated[int, Field(ge=0, description="bytes")]
    observed_us: float
    fitted_us: float
    relative_error: Annotated[float, Field(description="(fitted − observed) / observed")]
    fitted: Annotated[bool, Field(description="false: outside the fitted size range, shown for comparison")]


class Line(TypedDict):
    """The line t = a + b·L over a size range, and how well it fits."""

    latency_us: Annotated[float, Field(description="a")]
    bandwidth_mb_s: Annotated[float | None, Field(
        description="1/b, MB = 10^6 bytes; null when the time does not grow with the size")]
    slope_us_per_byte: Annotated[float, Field(description="b")]
    r_squared: Annotated[float | None, Field(description="of the fit weighted by 1/t²; null when every time is the same")]
    size_range: Annotated[list[int], Field(min_length=2, max_length=2, description="the smallest and largest size fitted")]
    points: Annotated[int, Field(ge=0, description="points fitted, every repetition of a size counted")]
    max_relative_error: Annotated[float, Field(description="over the fitted range")]
    max_allowed_error: float
    failing_sizes: Annotated[list[int], Field(description="the fitted sizes further than max_allowed_error off the line")]
    poor: bool
    reason: Annotated[str | None, Field(description="why the fit is poor, and what to do")]
    rows: Annotated[list[FittedRow], Field(description="every point given, by size")]


class SideLine(Line):
    """One side's line of a switch point: never split again."""

    switch: None


class SwitchPoint(TypedDict):
    """A split of the size range where one line each side fits far better than one line."""

    last_below: Annotated[int, Field(description="the largest size of the lower line")]
    first_above: Annotated[int, Field(description="the smallest size of the upper line")]
    residual_share: Annotated[float, Field(
        description="the two lines' squared relative residuals over the one line's")]
    below: SideLine
    above: SideLine


class FittedLine(Line):
    """A fitted line and, when it is poor, the switch point where two lines fit far better."""

    switch: SwitchPoint | None


class LabelFit(TypedDict):
    """The line fitted to one label's results (--each)."""

    label: str
    fit: Annotated[FittedLine | None, Field(description="null when the label has no line")]
    error: Annotated[str | None, Field(description="why the label has no line (too few sizes in the range)")]


class Fit(TypedDict):
    """A latency/bandwidth line fitted to message sizes"""

    benchmark: str
    quantity: Annotated[Literal["latency", "t_avg", "bandwidth"], Field(
        description="the metric stem the times come from (<quantity>.<bytes>)")]
    label: Annotated[str | None, Field(description="the one label asked for; null: the median over the labels")]
    labels: list[str]
    label_kind: LabelKind
    notes: list[str]
    points: list[SizedTime]
    fit: FittedLine
    each: NotRequired[list[LabelFit]]


class SideCompared(TypedDict):
    """One side of a comparison: its name, and the runs it selects when
    runs are compared (none when groups of nodes are)."""

    name: str
    selector: NotRequired[str]
    runs: NotRequired[list[StoredRun]]


Verdict = Literal["regressed", "improved", "unchanged", "too-few"]


class Judgement(TypedDict):
    """One test, before against after: of a subject, of a series as a whole or of a group."""

    subject: str
    before: Annotated[NumberOrNull, Field(description="the median (of the subjects' medians, for a whole series)")]
    after: NumberOrNull
    change: Annotated[NumberOrNull, Field(description="(after − before) / |before|")]
    n_before: Annotated[int, Field(ge=0, description="repetitions (subjects, for a whole series; units, for a group)")]
    n_after: Annotated[int, Field(ge=0)]
    p: NumberOrNull
    p_holm: NumberOrNull
    test: Annotated[str | None, Field(description="the test's name; null when none was run")]
    verdict: Verdict
    reason: str | None
    spread_before: Annotated[NumberOrNull, Field(description="IQR / median")]
    spread_after: NumberOrNull
    failed_before: Annotated[int, Field(ge=0)]
    failed_after: Annotated[int, Field(ge=0)]
    separated: Annotated[bool, Field(description="every value of one side beyond every value of the other")]


class SpreadCompared(TypedDict):
    """The spread of the repetitions (median over subjects of IQR / median), before against after."""

    before: NumberOrNull
    after: NumberOrNull
    p: NumberOrNull
    p_holm: NumberOrNull
    test: str | None
    verdict: Literal["more consistent", "less consistent", "alike", "not tested"]


class SeriesCompared(TypedDict):
    """One series compared: as a whole, and subject by subject."""

    benchmark: str
    metric: str
    name: str
    unit: str
    direction: Direction
    label_kind: LabelKind
    against: Annotated[str, Field(description="the other side's name: the other run, or a group")]
    baseline_run: int | None
    other_run: int | None
    pooled: Annotated[bool, Field(description="labels drawn anew every repetition: compared as one population")]
    overall: Judgement
    spread: SpreadCompared | None
    subjects: Annotated[list[Judgement], Field(description="none: the overall is its one subject")]
    only_before: list[str]
    only_after: list[str]


class ComparedGroups(TypedDict):
    """The groups of nodes compared: where they come from, the baseline and each group's nodes."""

    source: Annotated[str, Field(description="fact <key>, topology or --group")]
    baseline: str
    members: Annotated[dict[str, str], Field(description="group -> its nodes, folded")]
    ungrouped: Annotated[str, Field(description="the nodes with results but no group, folded")]


class RunSelection(TypedDict):
    """The runs holding results that a selector named, oldest first."""

    selector: str
    runs: list[StoredRun]


VerdictCounts = TypedDict("VerdictCounts", {"regressed": int, "improved": int, "unchanged": int, "too-few": int})
VerdictCounts.__doc__ = "How many ended with each verdict."


class CompareSummary(TypedDict):
    """Verdict counts, of the series as wholes and of their subjects, and the tests."""

    series: VerdictCounts
    subjects: VerdictCounts
    tests: Annotated[int, Field(ge=0, description="the tests Holm's correction took together")]
    too_few_to_test: Annotated[int, Field(ge=0, description="tests left out: they could not reach alpha")]


class Compare(TypedDict):
    """Two sets of runs compared, series by series"""

    format: Literal["oddnode-compare"]
    version: int
    store_schema: int
    mode: NotRequired[Literal["runs", "groups"]]
    alpha: NotRequired[float]
    min_effect: NotRequired[float]
    baseline: SideCompared
    other: SideCompared
    groups: NotRequired[Annotated[ComparedGroups, Field(description="the groups of nodes compared (--groups)")]]
    within: NotRequired[Annotated[RunSelection | None, Field(
        description="the runs a group comparison read; null: each series' newest")]]
    summary: CompareSummary
    series: list[SeriesCompared]
    only_in_baseline: NotRequired[list[str]]
    only_in_other: NotRequired[list[str]]
    same_run: NotRequired[Annotated[list[str], Field(description="series both sides read from one run: not compared")]]
    regressed: bool
    exit_status: NotRequired[int]


class RunWithResults(StoredRun):
    """A stored run and how many results it holds."""

    series: int
    results: int


CompareList = TypeAliasType("CompareList", Annotated[list[RunWithResults], Field(
    description="The stored runs with results")])


class HistoryRun(TypedDict):
    """The node's result of a series in one run."""

    run: int
    started: Annotated[str, Field(description="ISO 8601, the run's start")]
    command: str
    value: Annotated[float | None, Field(description="the best valid repetition; null when all failed")]
    valid: Annotated[int, Field(description="valid repetitions")]
    failed: Annotated[int, Field(description="failed repetitions")]
    vs_median_now_percent: Annotated[float | None, Field(
        description="against the series' median now, + better, - worse")]


class HistorySeries(TypedDict):
    """A node series the node has results of, run by run, oldest first."""

    benchmark: str
    metric: str
    unit: str
    direction: Direction
    median_now: Annotated[float | None, Field(description="the median of every node's newest result")]
    runs: list[HistoryRun]


class HistoryValue(TypedDict):
    run: int
    started: str
    value: str


class HistoryFact(TypedDict):
    """A fact of the node whose value changed: each value from the run that first reported it."""

    key: str
    values: list[HistoryValue]


class HistoryFinding(TypedDict):
    kind: str
    severity: str
    subject: str
    message: str


class HistoryAnalysis(TypedDict):
    """A recorded analysis and the findings of it that name the node (none: it was judged fine)."""

    run: int
    started: str
    command: Annotated[str, Field(description="the analysis' command: -w or -x when it judged a part")]
    findings: list[HistoryFinding]


class History(TypedDict):
    """A node's results, facts and findings run by run"""

    version: int
    node: str
    results: list[HistorySeries]
    facts: list[HistoryFact]
    analyses: list[HistoryAnalysis]
