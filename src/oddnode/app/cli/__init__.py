"""The ``oddnode`` command line: thin wrappers over the library, one module
per family of commands, assembled here with the options every command takes.

The layer above (the testbed) adds its own command group when the entry
point (oddnode.main) builds the app: ``build_app(command_groups=...)``."""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Annotated

import typer

from oddnode import __version__
from oddnode.app.cli import (
    analysis,
    check,
    compare,
    imports,
    interconnect,
    nodes,
    processes,
    sets,
    sweep,
    sync,
)
from oddnode.app.cli import affinity
from oddnode.app.cli import config as config_cli
from oddnode.app.cli import numa as numa_cli
from oddnode.app.cli import fit as fit_cli
from oddnode.app.cli import profile as profile_cli
from oddnode.app.cli import model as model_cli
from oddnode.app.cli import schema as schema_cli
from oddnode.app.cli import health as health_cli
from oddnode.app.cli.help_layout import readable_help
from oddnode.app.cli.common import (
    ExitStatus,
    QuietOption,
    VerboseOption,
    configure_commands,
    console,
    err_console,
    set_verbosity,
)
from oddnode.reach.base import Terminated, interrupt_status

def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
          quiet: QuietOption = False, verbose: VerboseOption = False) -> None:
    if version:
        console.print(f"oddnode {__version__}")
        raise typer.Exit()
    set_verbosity(quiet, verbose)


def build_app(command_groups: Iterable[Callable[[typer.Typer], None]] = ()) -> typer.Typer:
    """The command line: every command of this layer, and ``command_groups``,
    the registrations of the layers above (each adds its commands to the app
    it is given), made after Slurm's commands and before config, where the
    help has always listed the testbed."""
    app = typer.Typer(
        name="oddnode",
        help="Is the cluster ready for production? If not, which node, link or setting is the odd one out.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    # In this order the help lists the check and the analysis first, then each panel.
    app.add_typer(imports.import_app, name="import", rich_help_panel=analysis.RESULTS_PANEL)
    analysis.register(app)
    fit_cli.register(app)
    compare.register(app)
    schema_cli.register(app)
    interconnect.register(app)
    interconnect.register_switchbench(app)
    sets.register(app)
    sync.register(app)
    sweep.register(app)
    nodes.register(app)
    processes.register(app)
    affinity.register(app)
    numa_cli.register(app)
    profile_cli.register(app)
    model_cli.register(app)
    check.register(app)
    health_cli.register(app)
    for register in command_groups:
        register(app)
    config_cli.register(app)
    # Every command's unset options from the configuration files; -l and --connect-timeout where ssh reaches nodes.
    configure_commands(app)
    app.callback(invoke_without_command=True)(_root)
    readable_help()
    return app


# The statuses of the interrupts that went by: typer turns a
# KeyboardInterrupt it meets into status 130 (click into "Aborted!" and 1,
# which would read as findings), whatever the signal; run() exits with the
# interrupt's own status instead.
_interrupted: list[int] = []


def _on_signal(signum: int, frame: object) -> None:
    interrupt = Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    _interrupted.append(interrupt_status(interrupt))
    raise interrupt


def run(app: typer.Typer) -> None:
    """Run ``app`` as the oddnode command: the exit status of an interrupt
    its signal's, of a defect 3 with its traceback."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)
    try:
        app()
    except SystemExit as done:
        if _interrupted and done.code in (ExitStatus.FINDINGS, 130):
            sys.exit(_interrupted[-1])
        raise
    except KeyboardInterrupt as interrupt:
        sys.exit(interrupt_status(interrupt))
    except Exception:
        # A defect, not a verdict: the traceback for a report, and the status
        # of a command that could not run rather than 1 (findings).
        traceback.print_exc()
        err_console.print("[bold red]error:[/] oddnode stopped on an unexpected error (above); results stored "
                          "before it are kept", highlight=False)
        sys.exit(int(ExitStatus.COULD_NOT_RUN))
