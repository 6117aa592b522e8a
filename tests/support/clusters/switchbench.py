"""A scripted cluster answering the switch benchmark's chain, stream and
all-to-all jobs."""

from __future__ import annotations

from oddnode.measure.pair.switchbench import AllToAllOptions, ChainOptions, StreamOptions
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.reach.jobs import PREPARE_OPTION, decode_job

from support.clusters.batches import round_by_round
from support.outputs import GOOD_ALLTOALL, GOOD_RELAY, GOOD_STREAM, prepared_report, runner_report


NODES = [f"node{i:02d}" for i in range(1, 9)]


TWELVE = [f"node{i:02d}" for i in range(1, 13)]


PORT = 6300


CHAIN = ChainOptions(message_size=65536, seconds=0.3, port=PORT)


STREAMS = StreamOptions(message_size=65536, seconds=0.3, port=PORT)


ALLTOALL = AllToAllOptions(message_size=100000, port=PORT)


# The switch of the scripted cluster carries 4000 MB/s in all, 1000 MB/s per link.
LINK_MBPS, SWITCH_MBPS = 1000.0, 4000.0


ONE_WAY_STREAM = GOOD_STREAM.replace(
    "# directions: both (client_to_server and server_to_client at once)", "# directions: client_to_server").replace(
    "stream server_to_client 488701952 0.301053 1623.306\n", "")


def job_args(argv):
    return decode_job(argv[-1])["args"]


def option(args, flag):
    return args[args.index(flag) + 1]


def stream_output(rate: float, both: bool) -> str:
    """The genuine stream output with its rates set to ``rate`` MB/s."""
    text = GOOD_STREAM if both else ONE_WAY_STREAM
    text = text.replace("stream client_to_server 587399168 0.299869 1958.855",
                        f"stream client_to_server {int(rate * 0.3e6)} 0.300000 {rate:.3f}")
    return text.replace("stream server_to_client 488701952 0.301053 1623.306",
                        f"stream server_to_client {int(rate * 0.3e6)} 0.300000 {rate:.3f}")


def alltoall_output(rank: int, ranks: int, size: int, receive_mbps: float, seed: int) -> str:
    """A rank's output in the kernel's form, receiving at ``receive_mbps`` in every phase."""
    header = GOOD_ALLTOALL.split("phase 1 ")[0]
    header = (header.replace("# rank: 1", f"# rank: {rank}").replace("# ranks: 3", f"# ranks: {ranks}")
              .replace("# message_size: 100000", f"# message_size: {size}")
              .replace("# phases: 2", f"# phases: {ranks - 1}").replace("# seed: 0", f"# seed: {seed}"))
    receive_seconds = 1e-6 * size / receive_mbps
    send_seconds = 1e-6 * size / 5000.0
    lines = [f"phase {i} {(rank + i) % ranks} {(rank - i) % ranks} {size} {send_seconds:.9f} 5000.000 "
             f"{size} {receive_seconds:.9f} {receive_mbps:.3f}" for i in range(1, ranks)]
    total = (ranks - 1) * 1e-6 * size / 500.0
    return (header + "\n".join(lines) + f"\ntotal {total:.6f} {size * (ranks - 1)} {size * (ranks - 1)}\n"
            + f"# messages_checked: {2 * (ranks - 1)}\nvalidation ok\n")


class SwitchCluster:
    """Runs chains, stream pairs and all-to-alls like nodes behind one switch
    of SWITCH_MBPS with links of LINK_MBPS; pairs with ``weak`` are ``factor``
    times slower and ``slow`` receives all-to-all data at a fifth of the
    others' rate; ``down`` nodes are unreachable."""

    name = "scripted"

    def __init__(self, down=(), weak=None, factor=10.0, slow=None, refuse=None, corrupted=None):
        self.down, self.weak, self.factor, self.slow = set(down), weak, factor, slow
        self.refuse = refuse  # a node whose alltoall kernel cannot listen
        self.corrupted = corrupted  # a node that receives a corrupted all-to-all message
        self.rounds: list[dict[str, list[str]]] = []
        self.prepared: list[list[str]] = []

    def run(self, nodes, argv, *, timeout):
        assert PREPARE_OPTION in argv
        self.prepared.append(job_args(argv))
        return {node: NodeResult(node, NodeStatus.OK, prepared_report(), "", 0, 0.5) for node in nodes}

    @round_by_round
    def run_each(self, commands, *, timeout):
        assert timeout > 0
        self.rounds.append({node: job_args(argv) + [a for a in argv if a.startswith("--start-at=")]
                            for node, argv in commands.items()})
        results = {}
        for node, argv in commands.items():
            args = job_args(argv)
            if node in self.down:
                results[node] = NodeResult(node, NodeStatus.UNREACHABLE, "",
                                           f"ssh: connect to host {node} port 22: No route to host", None, 0.1)
            elif args[0] == "-r":
                results[node] = self._rank(node, args, commands)
            else:
                results[node] = NodeResult(node, NodeStatus.OK, self._pingpong(node, args, commands), "", 0, 1.0)
        return results

    def _pingpong(self, node, args, commands):
        if args[0] == "serve":
            return runner_report("served stream client_to_server 1 0.3 1\nserved echoes 0 0\n")
        if args[0] == "relay":
            return runner_report(GOOD_RELAY)
        if self.down & set(commands):
            return runner_report("", returncode=4, stderr="error: waiting for the greeting of the next hop: "
                                                           "the connection was closed by the other end\n")
        if "--both" in args:  # a stream pair
            server = option(args, "-H")
            rate = LINK_MBPS / (self.factor if self.weak in (node, server) else 1.0)
            if self.weak is not None:  # real pairs differ a little: a spread to judge the slow ones against
                rate *= 1 + int(node[-2:]) / 1000
            return runner_report(stream_output(rate, both=True))
        hops = len(commands) - 1  # a chain: every hop carries the stream through the switch
        return runner_report(stream_output(min(LINK_MBPS, SWITCH_MBPS / hops), both=False))

    def _rank(self, node, args, commands):
        ranks = option(args, "-R").split(",")
        rank, seed, size = int(option(args, "-r")), int(option(args, "-S")), int(option(args, "-s"))
        missing = [r for r, n in enumerate(commands) if n in self.down or n == self.refuse]
        if node == self.refuse:
            report = runner_report("", returncode=4, stderr=f"error: rank {rank}: cannot listen on port {PORT}: "
                                                            "it is already in use\n")
        elif missing:
            report = runner_report("", returncode=3, stderr=f"error: rank {rank}: 1 rank never connected within "
                                                            f"30 s: rank {missing[0]} ({ranks[missing[0]]})\n")
        else:
            rate = 200.0 if node == self.slow else 1000.0
            output = alltoall_output(rank, len(ranks), size, rate, seed)
            if node == self.corrupted:
                failed = (f"validation failed data bad=1/6 pass=1 phase=2 from={(rank - 2) % len(ranks)} "
                          "offset=8 expected=0x00 got=0xff")
                output = output.replace("validation ok", failed)
            report = runner_report(output)
        return NodeResult(node, NodeStatus.OK, report, "", 0, 1.0)
