"""``python -m oddnode.manpage OUTPUT``: oddnode(1), written from the help
of the whole oddnode command, the testbed's commands included (the page
itself: oddnode.app.cli.manpage)."""

from __future__ import annotations

import sys
from pathlib import Path

from oddnode.app.cli.manpage import man_page
from oddnode.main import app


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m oddnode.manpage OUTPUT")
    Path(args[0]).write_text(man_page(app), encoding="utf-8")


if __name__ == "__main__":
    main()
