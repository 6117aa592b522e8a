"""What the ``oddnode`` script runs: the answers the index gives at once
(the root help, the completion of a command's name: app/cli/quick.py),
else the whole command line (oddnode.main), which loads typer."""

from __future__ import annotations

import sys


def main() -> None:
    from oddnode import command_index
    from oddnode.app.cli.quick import answer

    # An index written before it held the root answers nothing here.
    status = answer(sys.argv[1:], command_index.COMMANDS, getattr(command_index, "ROOT", None))
    if status is not None:
        sys.exit(status)
    from oddnode.main import main as command_line

    command_line()
