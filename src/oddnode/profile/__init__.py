"""MPI profiles: the model of one run's calls per rank and message size,
readers of mpiP reports and Intel Trace Collector ASCII dumps, and
oddnode's own PMPI profiler."""

from oddnode.profile.itc import parse_itc, read_itc
from oddnode.profile.model import (
    ZERO_BUCKET,
    CallStats,
    Profile,
    RankProfile,
    bucket_label,
    bucket_range,
    communication_share,
    compute_times,
    histogram,
    imbalance,
    size_bucket,
    time_by_call,
    to_json,
)
from oddnode.profile.mpip import parse_mpip, read_mpip
from oddnode.profile.profiler import (
    ProfiledRun,
    ProfilerError,
    build_profiler_library,
    parse_profiler_output,
    profiled_argv,
    read_profiler_output,
    run_profiled,
)

__all__ = [
    "ZERO_BUCKET", "CallStats", "Profile", "RankProfile", "bucket_label", "bucket_range",
    "communication_share", "compute_times", "histogram", "imbalance", "parse_itc", "parse_mpip",
    "read_itc", "read_mpip", "size_bucket", "time_by_call", "to_json",
    "ProfiledRun", "ProfilerError", "build_profiler_library", "parse_profiler_output", "profiled_argv",
    "read_profiler_output", "run_profiled",
]
