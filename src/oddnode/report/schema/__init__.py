"""The schema of every ``--json`` document (oddnode.schema.json, JSON
Schema draft 2020-12) and the validation of a document against it."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_FILE = "oddnode.schema.json"


class DocumentInvalid(ValueError):
    """A document that its schema definition refuses; the message says where."""


class UnknownDocument(KeyError):
    """A document name the schema does not define."""

    def __str__(self) -> str:
        return str(self.args[0])


@cache
def _schema_text() -> str:
    return resources.files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The whole schema, a fresh copy."""
    return json.loads(_schema_text())


def _documents(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: definition for name, definition in schema["$defs"].items() if "x-commands" in definition}


def documents() -> list[str]:
    """The document names, in the schema's order."""
    return list(_documents(load_schema()))


DOCUMENTS = tuple(documents())


def shared() -> list[str]:
    """The definitions the documents share (finding, problem, ...)."""
    return [name for name, definition in load_schema()["$defs"].items() if "x-commands" not in definition]


def commands_of(name: str) -> list[str]:
    """The commands that print document ``name`` with ``--json``."""
    return list(document_schema(name)["$defs"][name]["x-commands"])


def document_schema(name: str) -> dict[str, Any]:
    """One document's (or shared part's) definition as a schema of its
    own, with every shared definition."""
    schema = load_schema()
    if name not in schema["$defs"]:
        raise UnknownDocument(f"no JSON document named {name!r} (the documents: {', '.join(DOCUMENTS)}; "
                              f"shared parts: {', '.join(shared())})")
    return {"$schema": schema["$schema"], "$id": f"{schema['$id']}:{name}",
            "title": schema["$defs"][name].get("title", name), "x-schema-version": schema["x-schema-version"],
            "$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}


def errors(document: Any, name: str) -> list[str]:
    """What in ``document`` its definition refuses, one line each (empty: valid)."""
    try:
        from jsonschema import Draft202012Validator
    except ModuleNotFoundError:
        raise ModuleNotFoundError("validating a document needs the jsonschema package "
                                  "(pip install 'oddnode[test]' or pip install jsonschema)") from None

    validator = Draft202012Validator(document_schema(name))
    found = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{name}: at {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in found]


def validate(document: Any, name: str) -> None:
    """Raise DocumentInvalid naming every place where ``document`` breaks definition ``name``."""
    found = errors(document, name)
    if found:
        raise DocumentInvalid("\n".join(found[:20]) + (f"\n... and {len(found) - 20} more" if len(found) > 20 else ""))
