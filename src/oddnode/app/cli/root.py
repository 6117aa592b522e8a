"""The root of the command line: its families of commands, the options
every command takes (``--version``, ``-q``, ``-v``), and the run that
turns interrupts and defects into exit statuses.

Each family is a module with a registration function, named in FAMILIES;
the entry point (oddnode.main) builds the app from them and from the
families of the layer above (the testbed), loading each only when one of
its commands is used (see lazy.py)."""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer

from oddnode import __version__
from oddnode.app.cli.common import (
    ExitStatus,
    QuietOption,
    VerboseOption,
    configure_commands,
    console,
    err_console,
    set_verbosity,
)
from oddnode.app.cli.help_layout import readable_help
from oddnode.app.cli.lazy import (
    CommandEntry,
    Registration,
    command_entries,
    lazy_group_class,
    register_family,
    root_listing,
)
from oddnode.app.cli.quick import Root

# The families of commands of this layer, in the order the help lists them
# (the check and the analysis first, then each panel); the layers above add
# theirs before CONFIG, where the help has always listed the testbed.
FAMILIES = tuple(Registration(f"oddnode.app.cli.{module}", function) for module, function in (
    ("imports", "register"), ("analysis", "register"), ("fit", "register"), ("compare", "register"),
    ("schema", "register"), ("interconnect", "register"), ("interconnect", "register_switchbench"),
    ("sets", "register"), ("sync", "register"), ("sweep", "register"), ("nodes", "register"),
    ("processes", "register"), ("affinity", "register"), ("numa", "register"), ("profile", "register"),
    ("model", "register"), ("check", "register"), ("health", "register")))
CONFIG = Registration("oddnode.app.cli.config")


def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
          quiet: QuietOption = False, verbose: VerboseOption = False) -> None:
    if version:
        console.print(f"oddnode {__version__}")
        raise typer.Exit()
    set_verbosity(quiet, verbose)


def _root_app(cls: type | None = None) -> typer.Typer:
    app = typer.Typer(
        name="oddnode",
        help="Is the cluster ready for production? If not, which node, link or setting is the odd one out.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        cls=cls,
    )
    app.callback(invoke_without_command=True)(_root)
    readable_help()
    return app


def registrations(above: Sequence[Registration] = ()) -> tuple[Registration, ...]:
    """Every family of the command line: this layer's, ``above`` (the
    layers above, each adding its commands to the app it is given), config."""
    return (*FAMILIES, *above, CONFIG)


def build_app(command_groups: Sequence[Registration] = ()) -> typer.Typer:
    """The whole command line, every family loaded: this layer's commands
    and ``command_groups``, the families of the layers above."""
    app = _root_app()
    for registration in registrations(command_groups):
        register_family(app, registration)
    # Every command's unset options from the configuration files; -l and --connect-timeout where ssh reaches nodes.
    configure_commands(app)
    return app


def build_lazy_app(index: Sequence[CommandEntry]) -> typer.Typer:
    """The command line whose families load when one of their commands is
    used: ``index`` lists them (lazy.command_entries wrote it)."""
    return _root_app(lazy_group_class(index, prepare=configure_commands))


def command_index(command_groups: Sequence[Registration] = ()) -> list[CommandEntry]:
    """The index of build_lazy_app, from the families themselves."""
    return command_entries(registrations(command_groups), prepare=configure_commands)


def root_index() -> Root | None:
    """The root's usage, help and options for the index (quick.py answers from them)."""
    return root_listing(typer.main.get_command(_root_app()))


# The statuses of the interrupts that went by: typer turns a
# KeyboardInterrupt it meets into status 130 (click into "Aborted!" and 1,
# which would read as findings), whatever the signal; run() exits with the
# interrupt's own status instead.
_interrupted: list[int] = []


def _on_signal(signum: int, frame: object) -> None:
    from oddnode.reach.base import Terminated, interrupt_status

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
        from oddnode.reach.base import interrupt_status

        sys.exit(interrupt_status(interrupt))
    except Exception:
        # A defect, not a verdict: the traceback for a report, and the status
        # of a command that could not run rather than 1 (findings).
        traceback.print_exc()
        err_console.print("[bold red]error:[/] oddnode stopped on an unexpected error (above); results stored "
                          "before it are kept", highlight=False)
        sys.exit(int(ExitStatus.COULD_NOT_RUN))
