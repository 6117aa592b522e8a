"""The ``oddnode`` command: the command line of oddnode.app.cli with the
testbed on top.  The testbed is the top layer: it adds its command group
(``oddnode testbed``) and is the cluster every command's --testbed runs on;
the command line below it imports nothing of it."""

from __future__ import annotations

from oddnode.app.cli import build_app, run
from oddnode.app.cli.common import register_testbed
from oddnode.testbed import cli as testbed_cli

register_testbed(testbed_cli.TestbedProvider())
app = build_app(command_groups=[testbed_cli.register])


def main() -> None:
    run(app)
