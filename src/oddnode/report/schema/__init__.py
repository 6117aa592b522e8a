"""The JSON Schema (draft 2020-12) of every ``--json`` document, generated
from the typed models in oddnode.report.documents, and the validation of a
document against it.

pydantic writes the schema of the models; this module shapes it the way
``oddnode schema`` has always printed it: one definition per document
(with the commands that print it in ``x-commands``) and per shared part,
under the names scripts refer to, a model that extends a shared part as
``allOf`` that part and its own keys, and every other model written out
where it is used.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

SCHEMA_ID = "urn:oddnode:schema:json-documents"
# Goes up when a document changes in a way a reader could trip on (docs/formats.md#json-schema).
SCHEMA_VERSION = 1
DRAFT = "https://json-schema.org/draft/2020-12/schema"
DEFINITION = "#/$defs/"
# The order of a definition's keywords as printed: what it is, then its shape.
KEYWORD_ORDER = ("title", "description", "x-commands", "type", "const", "enum", "required", "additionalProperties",
                 "properties", "items", "allOf", "anyOf", "unevaluatedProperties")


class DocumentInvalid(ValueError):
    """A document that its schema definition refuses; the message says where."""


class UnknownDocument(KeyError):
    """A document name the schema does not define."""

    def __str__(self) -> str:
        return str(self.args[0])


def _typed_dicts() -> dict[str, type]:
    """Every model class of oddnode.report.documents by the name pydantic gives its definition."""
    from typing_extensions import is_typeddict

    from oddnode.report.documents import analysis, interconnect, nodes, sets, shared

    found: dict[str, type] = {}
    for module in (shared, analysis, interconnect, sets, nodes):
        for value in vars(module).values():
            if is_typeddict(value) and value.__module__ == module.__name__:
                if value.__name__ in found:
                    raise ValueError(f"two document models named {value.__name__}: pydantic would rename them")
                found[value.__name__] = value
    return found


def _clean(node: Any) -> Any:
    """A pydantic schema without what it adds by itself: a title made from
    each name, ``additionalProperties: true`` (the default); a choice
    between plain types written as a list of types."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned = {}
    for key, value in node.items():
        if key == "title" or (key == "additionalProperties" and value is True):
            continue
        if key in ("properties", "$defs"):
            cleaned[key] = {name: _clean(schema) for name, schema in value.items()}
        else:
            cleaned[key] = _clean(value)
    choices = cleaned.get("anyOf")
    if choices and all(set(choice) == {"type"} and isinstance(choice["type"], str) for choice in choices):
        cleaned.pop("anyOf")
        cleaned["type"] = [choice["type"] for choice in choices]
    return _ordered(cleaned)


def _as_extension(definition: dict[str, Any], model: type, bases: dict[str, type]) -> dict[str, Any]:
    """A model that extends a shared part: ``allOf`` the part's definition
    and an object of the keys the model adds."""
    base = next((b for b in getattr(model, "__orig_bases__", ()) if b.__name__ in bases), None)
    if base is None:
        return definition
    own = [key for key in model.__annotations__ if key not in base.__annotations__]
    added: dict[str, Any] = {"type": "object"}
    required = [key for key in definition.get("required", ()) if key in own]
    if required:
        added["required"] = required
    added["properties"] = {key: definition["properties"][key] for key in own}
    outer = {key: value for key, value in definition.items()
             if key not in ("type", "required", "properties", "additionalProperties")}
    closed = {"unevaluatedProperties": False} if definition.get("additionalProperties") is False else {}
    # A closed extension: no key beyond the part's and its own (additionalProperties
    # cannot say so across allOf; unevaluatedProperties sees both).
    return {**outer, "allOf": [{"$ref": DEFINITION + base.__name__}, added], **closed}


def _inline(node: Any, written_out: dict[str, Any]) -> Any:
    """``node`` with each reference to a definition in ``written_out``
    replaced by the definition (the referring schema's own keywords, such as
    a field's description, kept over it)."""
    if isinstance(node, list):
        return [_inline(item, written_out) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "").removeprefix(DEFINITION)
    if ref in written_out:
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return _inline({**written_out[ref], **rest}, written_out)
    return {key: _inline(value, written_out) for key, value in node.items()}


def _renamed(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_renamed(item, names) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: (DEFINITION + names[value.removeprefix(DEFINITION)] if key == "$ref" else _renamed(value, names))
            for key, value in node.items()}


def _ordered(definition: dict[str, Any]) -> dict[str, Any]:
    first = {key: definition[key] for key in KEYWORD_ORDER if key in definition}
    return {**first, **{key: value for key, value in definition.items() if key not in first}}


@cache
def _generated() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from oddnode.report.documents import DOCUMENTS, SHARED

    named = {**{d.name: d.model for d in DOCUMENTS}, **SHARED}
    names = {model.__name__: name for name, model in named.items()}
    everything = TypeAdapter(tuple[tuple(named.values())]).json_schema(ref_template=DEFINITION + "{model}")
    definitions = _clean(everything["$defs"])
    models = _typed_dicts()
    shared_models = {model.__name__: model for model in named.values() if model.__name__ in models}
    definitions = {key: _as_extension(definition, models[key], shared_models) if key in models else definition
                   for key, definition in definitions.items()}
    written_out = {key: definition for key, definition in definitions.items() if key not in names}
    kept = {names[key]: _inline(definition, written_out) for key, definition in definitions.items() if key in names}
    kept = _renamed(kept, names)
    for document in DOCUMENTS:
        definition = kept[document.name]
        definition["title"] = definition.pop("description")
        definition["x-commands"] = list(document.commands)
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": "oddnode's JSON documents",
        "description": "The document each oddnode command prints with --json. Each document is a definition under "
                       "$defs with the commands that print it in x-commands; shared parts (a finding, a problem, a "
                       "statistics row, a run reference) are definitions the documents refer to. Generated from "
                       "the models in oddnode.report.documents.",
        "x-schema-version": SCHEMA_VERSION,
        "anyOf": [{"$ref": DEFINITION + document.name} for document in DOCUMENTS],
        "$defs": {name: _ordered(kept[name]) for name in named},
    }


def load_schema() -> dict[str, Any]:
    """The whole schema, a fresh copy."""
    return copy.deepcopy(_generated())


def documents() -> list[str]:
    """The document names, in the schema's order."""
    from oddnode.report.documents import DOCUMENTS as MODELS

    return [document.name for document in MODELS]


DOCUMENTS = tuple(documents())


def shared() -> list[str]:
    """The definitions the documents share (finding, problem, ...)."""
    from oddnode.report.documents import SHARED

    return list(SHARED)


def commands_of(name: str) -> list[str]:
    """The commands that print document ``name`` with ``--json``."""
    return list(_generated()["$defs"][name]["x-commands"])


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


@cache
def _validator(name: str):
    try:
        from jsonschema import Draft202012Validator
    except ModuleNotFoundError:
        raise ModuleNotFoundError("validating a document needs the jsonschema package "
                                  "(pip install 'oddnode[test]' or pip install jsonschema)") from None
    return Draft202012Validator(document_schema(name))


def errors(document: Any, name: str) -> list[str]:
    """What in ``document`` its definition refuses, one line each (empty: valid)."""
    found = sorted(_validator(name).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{name}: at {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in found]


def validate(document: Any, name: str) -> None:
    """Raise DocumentInvalid naming every place where ``document`` breaks definition ``name``."""
    found = errors(document, name)
    if found:
        raise DocumentInvalid("\n".join(found[:20]) + (f"\n... and {len(found) - 20} more" if len(found) > 20 else ""))
