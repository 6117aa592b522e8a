"""``oddnode testbed``: a virtual cluster of network namespaces on this
machine (root), and the faults one can inject into its nodes; and
``TestbedProvider``, the running testbed as every command's --testbed
reaches it.  The entry point (oddnode.main) registers both into the
command line of oddnode.app.cli, the layer below."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer

from oddnode.app.cli.common import VirtualCluster, console, could_not_run, fail, inform, positive_number
from oddnode.report import summaries
from oddnode.report.text import literal
from oddnode.testbed import DEFAULT_STATE_DIR, MAX_INSTANCES, Testbed, TestbedError, cgroups
from oddnode.testbed.lifecycle import DEFAULT_NODES

testbed_app = typer.Typer(help="A virtual cluster on this machine (root): network namespaces with sshd.",
                          no_args_is_help=True)
fault_app = typer.Typer(help="Inject a fault into one testbed node.", no_args_is_help=True)
testbed_app.add_typer(fault_app, name="fault")
StateDirOption = Annotated[Optional[Path], typer.Option(
    "--state-dir", help="Where the testbed keeps its state (default $ODDNODE_TESTBED_DIR or /run/oddnode/testbed).")]


def testbed_state_dir(state_dir: Optional[Path]) -> Path:
    """--state-dir, else $ODDNODE_TESTBED_DIR, else /run/oddnode/testbed."""
    return state_dir or Path(os.environ.get("ODDNODE_TESTBED_DIR") or DEFAULT_STATE_DIR)


@contextmanager
def testbed_errors() -> Iterator[None]:
    """The testbed's errors (not root, none up) in one line, exit 3."""
    try:
        yield
    except TestbedError as err:
        raise could_not_run(str(err)) from None


class TestbedProvider:
    """The running testbed as --testbed reaches it (common.VirtualClusterProvider)."""

    __test__ = False  # not a pytest test class

    error = TestbedError

    def running(self) -> VirtualCluster:
        bed = Testbed.load(testbed_state_dir(None))
        return VirtualCluster(nodeset=bed.nodeset, ssh_config=bed.ssh_config, topology=bed.topology)

    def node_cpu_quota(self) -> tuple[float, int]:
        try:
            nodes = len(Testbed.load(testbed_state_dir(None)).nodes)
        except TestbedError:
            nodes = DEFAULT_NODES
        cpus = cgroups.available_cpus()
        return cgroups.node_quota_us(cpus, nodes) / cgroups.PERIOD_US, cpus


def parse_rate(text: Optional[str], option: str) -> Optional[int]:
    from oddnode.testbed import parse_rate as parse

    try:
        return None if text is None else parse(text)
    except ValueError as err:
        raise fail(f"{option}: {err}") from None


@testbed_app.command("up")
def testbed_up(nodes: Annotated[int, typer.Option("--nodes", help="Number of nodes.")] = DEFAULT_NODES,
               leaves: Annotated[int, typer.Option(
                   "--leaves", help="Leaf switches the nodes hang from, under one core switch.")] = 1,
               link_rate: Annotated[Optional[str], typer.Option(
                   "--link-rate", help="Shape every node's link, e.g. 100mbit (default: unshaped).")] = None,
               slurm: Annotated[bool, typer.Option(
                   "--slurm", help="A real Slurm: slurmctld and munged on this machine, a slurmd in every node "
                                   "(Debian: slurm-wlm, munge).")] = False,
               instance: Annotated[int, typer.Option(
                   "--instance", min=0, max=MAX_INSTANCES - 1,
                   help=f"This testbed's number on the machine, 0 to {MAX_INSTANCES - 1}: testbed N is named "
                        "oddN-... with addresses in 10.77.N.0/24, so several can be up at once, each with its "
                        "own --state-dir.")] = 0,
               networks: Annotated[Optional[list[str]], typer.Option(
                   "--network", metavar="NAME",
                   help="A further network every node is on, a switch of its own (a second fabric; repeatable, "
                        "2 at most): each node's interface NAME0, addresses in 10.78.N.0/24 (then 10.79.N), "
                        "names NODE-NAME in every node's /etc/hosts.")] = None,
               state_dir: StateDirOption = None) -> None:
    """Bring up N nodes, each with its own address, hostname, mounts, processes and sshd (and slurmd)."""
    from oddnode.testbed import format_rate, up
    from oddnode.testbed.config import network_interface

    rate = parse_rate(link_rate, "--link-rate")
    with testbed_errors():
        bed = up(nodes=nodes, state_dir=testbed_state_dir(state_dir), leaves=leaves, link_rate=rate, slurm=slurm,
                 instance=instance, networks=networks or ())
    inform(summaries.testbed_up_line(bed))
    leaves_line = summaries.testbed_leaves_line(bed)
    if leaves_line:
        inform(leaves_line, highlight=False)
    if bed.link_rate:
        inform(f"every node's link shaped to {format_rate(bed.link_rate)}")
    for name, addresses in bed.networks.items():
        first = next(iter(addresses))
        inform(f"network {name}: every node on it as NODE-{name} ({first}-{name} at {addresses[first]}), "
               f"interface {network_interface(name)}", highlight=False)
    if bed.slurm_conf:
        inform(f"Slurm: every node idle in partition testbed; export SLURM_CONF={bed.slurm_conf}", highlight=False)


@testbed_app.command("status")
def testbed_status(state_dir: StateDirOption = None) -> None:
    """Nodes, addresses, sshd state and injected faults."""
    from oddnode.testbed import status

    with testbed_errors():
        console.print(literal(status(testbed_state_dir(state_dir)).summary()), highlight=False)


@testbed_app.command("down")
def testbed_down(state_dir: StateDirOption = None) -> None:
    """Remove every namespace, link, mount and process the testbed created."""
    from oddnode.testbed import down

    with testbed_errors():
        down(testbed_state_dir(state_dir))
    inform("testbed down")


def _fault_file(state_dir: Optional[Path], node: str, path: str, content: str) -> None:
    from oddnode.testbed import fault_file

    with testbed_errors():
        fault_file(testbed_state_dir(state_dir), node, path, content)
    inform(f"{node}: {path} replaced")


@fault_app.command("bios-date")
def fault_bios_date(node: str, date: Annotated[str, typer.Argument(help="e.g. 09/02/2004")],
                    state_dir: StateDirOption = None) -> None:
    """Give one node another BIOS date (/sys/class/dmi/id/bios_date)."""
    _fault_file(state_dir, node, "/sys/class/dmi/id/bios_date", date + "\n")


@fault_app.command("memory")
def fault_memory(node: str,
                 percent: Annotated[Optional[float], typer.Option(help="MemTotal as a percentage of the real one.")] = None,
                 kib: Annotated[Optional[int], typer.Option(help="MemTotal in KiB.")] = None,
                 state_dir: StateDirOption = None) -> None:
    """Show one node less (or more) memory in /proc/meminfo."""
    from oddnode.testbed import meminfo_with_total, real_memory_total_kib

    if (percent is None) == (kib is None):
        raise fail("give either --percent or --kib")
    total = kib if kib is not None else int(real_memory_total_kib() * percent / 100)
    _fault_file(state_dir, node, "/proc/meminfo", meminfo_with_total(total))


@fault_app.command("smt")
def fault_smt(node: str, value: Annotated[str, typer.Argument(help="on, off, forceoff or notsupported")],
              state_dir: StateDirOption = None) -> None:
    """Give one node another SMT setting (/sys/devices/system/cpu/smt/control)."""
    _fault_file(state_dir, node, "/sys/devices/system/cpu/smt/control", value + "\n")


@fault_app.command("file")
def fault_any_file(node: str, path: str, content: str, state_dir: StateDirOption = None) -> None:
    """Replace any existing file, as that node alone sees it."""
    _fault_file(state_dir, node, path, content)


@fault_app.command("hang")
def fault_hang_file(node: str, path: str, state_dir: StateDirOption = None) -> None:
    """Make reading a file hang on one node, as on a stuck file system."""
    from oddnode.testbed import fault_hang

    with testbed_errors():
        fault_hang(testbed_state_dir(state_dir), node, path)
    inform(f"{node}: reading {path} now hangs")


@fault_app.command("hog")
def fault_hog(node: str, seconds: Annotated[int, typer.Option(help="How long it runs.")] = 600,
              workers: Annotated[int, typer.Option(help="Processes; 0: one per CPU of the node.")] = 0,
              state_dir: StateDirOption = None) -> None:
    """Start a competing process (a memory-bandwidth hog) inside one node, bounded in time."""
    from oddnode.testbed import fault_process, hog_argv

    with testbed_errors():
        pid = fault_process(testbed_state_dir(state_dir), node, hog_argv(seconds, workers=workers), seconds)
    inform(f"{node}: competing process {pid} for {seconds} s")


@fault_app.command("daemon")
def fault_spawning_daemon(
        node: str,
        period_ms: Annotated[float, typer.Option("--period-ms", callback=positive_number, help="Milliseconds between two rounds of commands.")] = 20.0,
        seconds: Annotated[int, typer.Option(help="How long it runs.")] = 600,
        state_dir: StateDirOption = None) -> None:
    """Start a daemon inside one node that spawns short-lived commands (basename, sed, sh) every period."""
    from oddnode.testbed import fault_daemon

    with testbed_errors():
        pid = fault_daemon(testbed_state_dir(state_dir), node, period_ms, seconds)
    inform(f"{node}: spawning daemon {pid} every {period_ms:g} ms for {seconds} s")


RateOption = Annotated[Optional[str], typer.Option("--rate", help="The shaped rate, e.g. 10mbit.")]
SlowerOption = Annotated[Optional[float], typer.Option(
    "--slower", callback=positive_number, help="Divide the link's rate by this (10: a tenth of the others).")]


def _shaping(rate: Optional[str], slower: Optional[float]) -> tuple[Optional[int], Optional[float]]:
    if (rate is None) == (slower is None):
        raise fail("give either --rate or --slower")
    return parse_rate(rate, "--rate"), slower


@fault_app.command("link")
def fault_link_rate(node: str, rate: RateOption = None, slower: SlowerOption = None,
                    network: Annotated[Optional[str], typer.Option(
                        "--network", metavar="NAME", help="Its link on this further network (default: the first).")]
                    = None,
                    state_dir: StateDirOption = None) -> None:
    """Shape one node's link, both ways, to a lower rate (tc tbf)."""
    from oddnode.testbed import fault_link, format_rate

    bits, divisor = _shaping(rate, slower)
    with testbed_errors():
        shaped = fault_link(testbed_state_dir(state_dir), node, bits, divisor=divisor, on=network)
    inform(f"{node}: link{f' on {network}' if network else ''} shaped to {format_rate(shaped)}", highlight=False)


@fault_app.command("uplink")
def fault_uplink_rate(leaf: Annotated[str, typer.Argument(help="A leaf switch: leaf1, leaf2...")],
                      rate: RateOption = None, slower: SlowerOption = None,
                      state_dir: StateDirOption = None) -> None:
    """Shape one leaf switch's uplink to the core, both ways (--slower divides its non-blocking rate)."""
    from oddnode.testbed import fault_uplink, format_rate

    bits, divisor = _shaping(rate, slower)
    with testbed_errors():
        shaped = fault_uplink(testbed_state_dir(state_dir), leaf, bits, divisor=divisor)
    inform(f"{leaf}: uplink shaped to {format_rate(shaped)}")


@fault_app.command("linecard")
def fault_linecard_rate(leaf: Annotated[str, typer.Argument(help="A leaf switch: leaf1, leaf2...")],
                        rate: RateOption = None, slower: SlowerOption = None,
                        state_dir: StateDirOption = None) -> None:
    """Make a leaf a chassis line card without local switching: all its nodes send, to each other too, shares one
    fabric link (--slower divides its non-blocking rate)."""
    from oddnode.testbed import fault_linecard, format_rate

    bits, divisor = _shaping(rate, slower)
    with testbed_errors():
        shaped = fault_linecard(testbed_state_dir(state_dir), leaf, bits, divisor=divisor)
    inform(f"{leaf}: a line card; its nodes share one fabric link of {format_rate(shaped)}")


@fault_app.command("delay")
def fault_link_delay(node: str, ms: Annotated[float, typer.Option("--ms", callback=positive_number, help="Milliseconds each way.")],
                     state_dir: StateDirOption = None) -> None:
    """Delay every packet on one node's link (tc netem; the kernel needs sch_netem)."""
    from oddnode.testbed import fault_delay

    with testbed_errors():
        fault_delay(testbed_state_dir(state_dir), node, ms)
    inform(f"{node}: link delayed {ms:g} ms each way")


@fault_app.command("stop-sshd")
def fault_stop_sshd(node: str, state_dir: StateDirOption = None) -> None:
    """Make one node unreachable by stopping its sshd."""
    from oddnode.testbed import stop_sshd

    with testbed_errors():
        stop_sshd(testbed_state_dir(state_dir), node)
    inform(f"{node}: sshd stopped")


@fault_app.command("clear")
def fault_clear(state_dir: StateDirOption = None) -> None:
    """Undo every injected fault."""
    from oddnode.testbed import clear_faults

    with testbed_errors():
        clear_faults(testbed_state_dir(state_dir))
    inform("faults cleared")


def register(app: typer.Typer) -> None:
    """Add ``oddnode testbed`` to the command line, in its own help panel."""
    app.add_typer(testbed_app, name="testbed", rich_help_panel="Virtual cluster")
