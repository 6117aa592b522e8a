"""What the ``oddnode`` script runs: the answers the index gives at once
(the root help, the completion of a command's name: app/cli/quick.py),
else the whole command line (oddnode.main), which loads typer."""

from __future__ import annotations

import sys


def main() -> None:
    from oddnode.app.cli.quick import answer
    from oddnode.command_index import COMMANDS, ROOT

    status = answer(sys.argv[1:], COMMANDS, ROOT)
    if status is not None:
        sys.exit(status)
    from oddnode.main import main as command_line

    command_line()
