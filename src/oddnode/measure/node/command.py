"""A site's own program on every node (``check --command CMD --parser
NAME``): NPB, an application, a vendor's test.  It runs R times like our
kernels, every node at once, in a directory of its own; each run's output
(or a file it writes) is read by one of the registered parsers (``oddnode
import --help`` lists them: npb, hpcc, stream, imb, osu, fio, ...), which
also says whether the run passed its own accuracy check.  Each node is
judged by its best run, as for our kernels.

Its series are the parser's, under the ``command.`` family
(``command.npb.bt.S`` for NPB's BT class S) so that the check judges them
with its compute stage.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex
from dataclasses import dataclass

from oddnode.measure.benchmarks import BenchmarkSpec
from oddnode.measure.node.dgemm import COMPUTE_STAGE
from oddnode.measure.node.hpl import DEFAULT_HPL_TIMEOUT
from oddnode.measure.steps import NodeBenchmark, option
from oddnode.parsers import get_parser
from oddnode.parsers.base import ParsedOutput, ParseError, UnknownToolError
from oddnode.reach.jobs import parse_tool_output, tool_argv

COMMAND_FAMILY = "command"
# Seconds one run may take on a node, as hpcc's: under the node runner's
# 600 s, so that a run too slow is cut and said by the runner itself (an
# NPB class B kernel or a short application case takes a minute or two).
DEFAULT_COMMAND_TIMEOUT = DEFAULT_HPL_TIMEOUT


@dataclass(frozen=True)
class CommandOptions:
    """The program, the parser of its output, the file it writes (None: its
    standard output is read) and the seconds a run may take."""

    command: str | None = option(None, help="A program to run on every node, R times, with its arguments "
                                            "(no shell; e.g. 'bt.S.x' or '/opt/npb/bin/cg.B.x')",
                                 shown_default="none")
    parser: str | None = option(None, help="With --command: the parser of its output (npb, hpcc, stream, imb, "
                                           "osu, fio, ...; see oddnode import)", shown_default="none")
    output_file: str | None = option(None, help="With --command: the file it writes its results to, read instead "
                                                "of its output", shown_default="its output")
    timeout: float = option(DEFAULT_COMMAND_TIMEOUT, help="With --command: seconds one run may take on a node",
                            flag="command-timeout", check="seconds")


def command_words(options: CommandOptions) -> list[str]:
    """The program and its arguments, split as a shell would split them
    (quotes kept together), never run through one."""
    if not options.command:
        raise ValueError("command: give the program to run (--command 'bt.S.x')")
    try:
        words = shlex.split(options.command)
    except ValueError as err:
        raise ValueError(f"command {options.command!r}: {err}") from None
    if not words:
        raise ValueError("command: give the program to run (--command 'bt.S.x')")
    return words


def parse_command_run(text: str, source: str, parser: str, output_file: str | None) -> ParsedOutput:
    """The node runner's report of the program's run, its output (or file)
    read by ``parser``; its measurements under the command family, all
    invalid when the program failed or its parser says so."""
    report = parse_tool_output(source, text)
    output = report.stdout if output_file is None else report.collected.get(output_file)
    if output is None:
        raise ParseError(source, None, f"{report.tool} wrote no {output_file!r} (exit status {report.returncode})")
    parsed = get_parser(parser)(output, source)
    problems = list(parsed.problems)
    if report.returncode != 0:
        problems.append(f"{report.tool} exited with status {report.returncode}")
    valid = parsed.valid and not problems
    measurements = [dataclasses.replace(m, benchmark=f"{COMMAND_FAMILY}.{m.benchmark}", valid=m.valid and valid)
                    for m in parsed.measurements]
    configuration = {**parsed.configuration, "tool_path": report.tool_path, "cpu_model": report.cpu_model}
    return ParsedOutput(parsed.tool, measurements, valid, problems, configuration)


class CommandStep(NodeBenchmark):
    """A site's program on every node, read by a registered parser."""

    name = "command"
    stage = COMPUTE_STAGE
    options = CommandOptions
    series = (COMMAND_FAMILY,)
    default = False
    summary = "a site's own program on every node (--command), its output read by a registered parser"

    def check(self, options: CommandOptions) -> None:
        command_words(options)
        if not options.parser:
            raise ValueError("command: give the parser of its output (--parser npb; see oddnode import)")
        try:
            get_parser(options.parser)
        except UnknownToolError as err:
            raise ValueError(f"command: {err.args[0]}") from None
        super().check(options)

    def spec(self, options: CommandOptions) -> BenchmarkSpec:
        words = command_words(options)
        return BenchmarkSpec(
            name=self.name,
            stage=self.stage,
            argv=tool_argv(words[0], words[1:], collect=[options.output_file] if options.output_file else [],
                           timeout=options.timeout),
            parse=functools.partial(parse_command_run, parser=options.parser or "", output_file=options.output_file),
            synchronized=True,
        )
