"""``oddnode schema``: the JSON Schema of every document a command prints
with ``--json`` (generated from the models in oddnode.report.documents),
whole or one document's definition, for scripts to fetch."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from oddnode.app.cli.analysis import RESULTS_PANEL
from oddnode.app.cli.common import console, fail, print_json


def documents_table():
    """Every document, the commands that print it and what it holds: a table
    whose last column folds to fit the terminal."""
    from rich.table import Table

    from oddnode.report.schema import documents, load_schema

    definitions = load_schema()["$defs"]
    table = Table("document", "printed by", "what it holds", box=None)
    for name in documents():
        table.add_row(name, ", ".join(definitions[name]["x-commands"]), definitions[name]["title"])
    return table


def schema_command(
    document: Annotated[Optional[str], typer.Argument(
        metavar="[DOCUMENT]", help="One document's definition (with the shared definitions), e.g. analysis, "
                                   "pairs, inventory, or a shared part such as finding; --list names them. "
                                   "Default: the whole schema.")] = None,
    list_documents: Annotated[bool, typer.Option(
        "--list", help="Name every document, the commands that print it and what it holds.")] = False,
) -> None:
    """Print the JSON Schema (draft 2020-12) of the documents the commands print with --json."""
    from oddnode.report.schema import UnknownDocument, document_schema, load_schema, shared

    if list_documents:
        if document is not None:
            raise fail("--list names every document: give no DOCUMENT with it")
        console.print(documents_table())
        console.print(f"shared parts: {', '.join(shared())}", highlight=False)
        return
    try:
        schema = load_schema() if document is None else document_schema(document)
    except UnknownDocument as error:
        raise fail(str(error)) from None
    print_json(schema)


def register(app: typer.Typer) -> None:
    app.command("schema", rich_help_panel=RESULTS_PANEL)(schema_command)
