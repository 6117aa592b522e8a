"""Sample outputs of our kernels and of the node runner, as they come back
from nodes, and process accounting records packed as the kernel writes them."""

from __future__ import annotations

import json
import struct

from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import RUNNER_VERSION


GOOD_PING = """\
Welcome to node1
# oddnode pingpong kernel v1
# mode: ping
# protocol: 1
# io_timeout_seconds: 30
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 20
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp -lpthread
# peer: ::1
# port: 6211
# sizes: 0,1,64,4096,65536
# seconds_per_size: 0.02
# connect_wait_seconds: 30
# min_batches: 10
# min_batch_ticks: 1000
# min_batch_seconds: 0.001
# min_batch_ns: 1000000
# warmup_rounds: 2 to 16, timed one by one, not counted
# time: one-way = batch time / round trips / 2; min and median over batches
# echo: the server reads a whole message, then sends it back
# pattern: splitmix64 of seed, size and word, XOR a word per round; every echo compared
# seed: 0x04e74db5dcc370cc
# zero_size: a 1-byte token per message (TCP cannot carry an empty one)
# peer_address: [::1]:6211
# connect_attempts: 3
# local_address: [::1]:46082
# family: ipv6
# tcp_nodelay: on
# socket_buffers: send 4194304 receive 131072 (kernel defaults, autotuned)
result 0 1110 6.997 7.303 10
result 1 1456 6.973 7.142 13
result 64 1443 6.901 7.158 13
result 4096 1296 6.948 7.303 12
result 65536 530 15.470 16.437 10
# echoes_checked: 5915
validation ok
"""


GOOD_STREAM = """\
# oddnode pingpong kernel v1
# mode: stream
# protocol: 1
# io_timeout_seconds: 30
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 20
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp -lpthread
# peer: 127.0.0.1
# port: 6202
# message_size: 65536
# seconds: 0.3
# directions: both (client_to_server and server_to_client at once)
# connect_wait_seconds: 30
# rate: the receiver's bytes over its time, first read to end (the first read's bytes not counted); MB = 10^6 B
# check: every message's stamp (tag and sequence number), and bytes received = bytes sent
# connect_attempts: 1
# local_address: 127.0.0.1:35698
# family: ipv4
# tcp_nodelay: on
# socket_buffers: send 3939840 receive 131072 (kernel defaults, autotuned)
# sent_client_to_server: 587464704 bytes in 0.300027 s, 8964 messages
# received_client_to_server: 587464704 bytes, 587399168 timed
# received_server_to_client: 488833024 bytes, 488701952 timed, 7459 messages
stream client_to_server 587399168 0.299869 1958.855
stream server_to_client 488701952 0.301053 1623.306
validation ok
"""


GOOD_ALLTOALL = """\
Last login: Mon Jan  1 00:00:00 2024
# oddnode alltoall kernel v1
# protocol: 1
# rank: 1
# ranks: 3
# host: 127.0.0.1
# port: 41001
# message_size: 100000
# phases: 2
# warmup_passes: 1
# seed: 0
# connect_wait_seconds: 5
# io_timeout_seconds: 30
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 20
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp
# schedule: phase i sends to rank (r+i) mod N and receives from rank (r-i) mod N at once
# barrier: coordinated by rank 0 over the mesh, before the first phase and after every phase; checks and the next message are made while waiting
# rate: bytes over the time from this rank's release into the phase to its last byte; MB = 10^6 B
# pattern: splitmix64 of seed, pass, phase, sender and receiver, then the word; every byte checked
# connect_attempts: 1
# mesh_seconds: 0.045599
phase 1 2 0 100000 0.000019000 5263.158 100000 0.000040000 2500.000
phase 2 0 2 100000 0.000013000 7692.308 100000 0.000050000 2000.000
total 0.002175 200000 200000
# messages_checked: 4
validation ok
"""


GOOD_RELAY = """\
# oddnode pingpong kernel v1
# mode: relay
# protocol: 1
# io_timeout_seconds: 30
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 20
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp -lpthread
# port: 40102
# next: 127.0.0.1
# next_port: 40103
# wait_seconds: 10
# relay_buffer_bytes: 4194304
# forwarding: every byte both ways, uninterpreted and unchanged, until both ends close
# listening: 0.0.0.0:40102 [::]:40102
# downstream: 127.0.0.1 port 40103
# connect_attempts: 1
# upstream: 127.0.0.1:55044
# local_address: 127.0.0.1:40102
# family: ipv4
# tcp_nodelay: on
# socket_buffers: send 3939840 receive 131072 (kernel defaults, autotuned)
relayed upstream_to_downstream 683933848 0.501636 1363.406
relayed downstream_to_upstream 192 0.501538 0.000
# session: both ends closed
"""


# Genuine output of the memory kernel (2 threads, 2e6 elements, gcc 12).
KERNEL_STDOUT = """\
# oddnode memory kernel v1
# elements: 2000000
# bytes_per_element: 8
# bytes_per_array: 16000000
# ntimes: 3
# threads_requested: 2
# threads_counted: 2
# proc_bind: spread
# places: 2
# thread_cpus: 0,1
# timer: clock_gettime(CLOCK_MONOTONIC)
# timer_granularity_ns: 37
# compiler: gcc 12.2.0
# cflags: -O3 -march=native -fopenmp
# scalar: 0.41421356237309503
result copy 23542.845 0.001373403 0.001359224 0.001387583
result scale 24801.607 0.001427223 0.001290239 0.001564206
result add 28333.612 0.002063857 0.001694101 0.002433613
result triad 28985.227 0.001703753 0.001656016 0.001751491
# tolerance: 5.329e-15
# max_relative_error: a(triad) 0.000e+00 b(scale) 0.000e+00 c(add) 0.000e+00
validation ok
"""


def runner_report(kernel_stdout: str = KERNEL_STDOUT, **changes: object) -> str:
    """What the node runner prints: one JSON line around the kernel's output."""
    report = {
        "runner_version": RUNNER_VERSION, "cache_key": "0123456789abcdef" * 4, "built": False,
        "compiler": "cc (GCC) 12.2.0", "flags": ["-O3", "-march=native", "-fopenmp"],
        "cpu_model": "Test CPU", "build_seconds": None, "returncode": 0,
        "stdout": kernel_stdout, "stderr": "",
    }
    report.update(changes)
    return json.dumps(report) + "\n"


def prepared_report() -> str:
    """What the node runner prints when asked to build and stop."""
    return json.dumps({"runner_version": RUNNER_VERSION, "prepared": True}) + "\n"


def ok(node: str, stdout: str) -> NodeResult:
    return NodeResult(node, NodeStatus.OK, stdout, "", 0, 1.0)


# The field names of struct acct_v3, in order, and their offsets as we read them.
OFFSETS = {"ac_flag": 0, "ac_version": 1, "ac_tty": 2, "ac_exitcode": 4, "ac_uid": 8, "ac_gid": 12, "ac_pid": 16,
           "ac_ppid": 20, "ac_btime": 24, "ac_etime": 28, "ac_utime": 32, "ac_stime": 34, "ac_mem": 36, "ac_io": 38,
           "ac_rw": 40, "ac_minflt": 42, "ac_majflt": 44, "ac_swaps": 46, "ac_comm": 48}


def pack(*, flag=0, version=3, tty=0, exitcode=0, uid=0, gid=0, pid=100, ppid=1, btime=1_700_000_000, etime=0.0,
         utime=0, stime=0, mem=0, minflt=0, majflt=0, comm=b"true", big=False) -> bytes:
    """One v3 record as the kernel writes it; times are raw (AHZ ticks, comp_t)."""
    layout = ">BB" if big else "<BB"
    version_byte = version | (0x80 if big else 0)
    return struct.pack(layout + "HIIIIIIf8H16s", flag, version_byte, tty, exitcode, uid, gid, pid, ppid, btime,
                       etime, utime, stime, mem, 0, 0, minflt, majflt, 0, comm)
