"""``oddnode config show``: the defaults the configuration files give, and where each comes from."""

from __future__ import annotations

from typing import Annotated

import typer

from oddnode.app.cli.common import console, fail, inform, print_json

config_app = typer.Typer(help="The defaults from /etc/oddnode/config.yaml, ~/.config/oddnode/config.yaml and "
                              "clush.conf.", no_args_is_help=True)


@config_app.command("show")
def config_show(json_out: Annotated[bool, typer.Option("--json", help="Print the settings as one JSON document.")]
                = False) -> None:
    """Print every setting's effective value (before the command line) and the file and line it comes from,
    then what clush.conf sets for ssh."""
    from rich.table import Table

    from oddnode.core.config import ConfigError, load_settings, settings_document
    from oddnode.report.text import literal, literals
    from oddnode.reach.ssh import read_clush_conf

    try:
        document = settings_document(load_settings(), read_clush_conf())
    except ConfigError as err:
        raise fail(str(err)) from None
    if json_out:
        print_json(document)
        return
    table = Table("setting", "value", "from", box=None)
    for key, setting in document["settings"].items():
        table.add_row(*literals((key, "-" if setting["value"] is None else setting["value"], setting["origin"])))
    console.print(table)
    inform(f"files read: {literal(', '.join(document['files']) or 'none')}", highlight=False)
    clush = document["clush_conf"]
    given = {name: value for name, value in clush.items() if name != "files" and value is not None}
    inform(literal(f"clush.conf ({', '.join(clush['files']) or 'none read'}): "
                   + (", ".join(f"{name}={value}" for name, value in given.items()) or "nothing for ssh")),
           highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
