"""The ``oddnode`` command line: thin wrappers over the library, one module
per family of commands (analysis, check, interconnect, ...), assembled in
``root`` with the options every command takes.

This package's own import loads nothing, so that ``quick`` answers the root
help and the completion of a command's name before typer and the library
load; ``lazy`` loads a family only when one of its commands is used."""
