"""The ``oddnode`` command: the command line of oddnode.app.cli with the
testbed on top.  The testbed is the top layer: it adds its command group
(``oddnode testbed``) and is the cluster every command's --testbed runs on;
the command line below it imports nothing of it.

The app loads a family of commands only when one of them is used, from
the index in oddnode.command_index, which also holds what ``oddnode
--help`` and the completion of a command's name print before the app
loads at all (oddnode.start).  ``python -m oddnode.main`` rewrites the index
(``make man`` runs it) after a command is added or changed; a unit test
says when that is due."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from oddnode.app.cli.common import register_testbed
from oddnode.app.cli.lazy import CommandEntry, index_source
from oddnode.app.cli.root import Registration, build_app, build_lazy_app, command_index, root_index, run

# The families of this layer's commands.
TESTBED = (Registration("oddnode.testbed.cli"),)
INDEX = Path(__file__).with_name("command_index.py")
INDEX_DOCSTRING = ("Every command of the oddnode command line, for its help and completion to list without\n"
                   "loading any: written by ``python -m oddnode.main`` (``make man``); do not edit.")


def _testbed_provider():
    from oddnode.testbed.cli import TestbedProvider

    return TestbedProvider()


register_testbed(_testbed_provider)


@functools.cache
def lazy_app():
    """The command line, each family loaded when one of its commands is used."""
    from oddnode.command_index import COMMANDS

    return build_lazy_app([CommandEntry(*row) for row in COMMANDS])


def full_app():
    """The command line with every family loaded (to walk all its commands)."""
    return build_app(TESTBED)


def written_index() -> str:
    """The index as the families give it now."""
    return index_source(command_index(TESTBED), root_index(), INDEX_DOCSTRING)


def __getattr__(name: str):
    # ``app``, built on first use: rewriting a broken index must not need it.
    if name == "app":
        return lazy_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # An ``app`` set on this module (a test's stand-in) runs in its place.
    run(globals().get("app") or lazy_app())


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else INDEX
    target.write_text(written_index(), encoding="utf-8")
    print(f"wrote {target}")
