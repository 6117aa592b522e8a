"""What runs on a node runs on Python 3.6, the oldest python3 of the
clusters oddnode meets: its grammar, and none of the standard library's
later modules, keywords, methods or annotations that evaluate at import."""

from __future__ import annotations

import ast
from importlib import resources

import pytest

OLDEST = (3, 6)
LATER_MODULES = {"dataclasses", "contextvars", "importlib.resources", "importlib.metadata", "graphlib", "zoneinfo",
                 "tomllib"}
# subprocess.run's keywords from 3.7 on.
LATER_KEYWORDS = {"capture_output", "text"}
LATER_METHODS = {"removeprefix", "removesuffix", "isqrt", "prod", "cache", "shlex_join"}
BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}
MODULES = sorted(path.name for path in resources.files("oddnode.onnode").iterdir()
                 if path.name.endswith(".py") and path.name != "__init__.py")


def later_than_36(tree: ast.AST) -> list[str]:
    """What in ``tree`` needs a Python after 3.6 (line: what)."""
    found = []

    def annotation(node):
        for part in ast.walk(node):
            if isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
                found.append(f"{part.lineno}: an annotation X | Y")
            elif isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) and \
                    part.value.id in BUILTIN_GENERICS:
                found.append(f"{part.lineno}: an annotation {part.value.id}[...]")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            found.append(f"{node.lineno}: from __future__ import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in LATER_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module in LATER_MODULES or any(
                f"{node.module}.{a.name}" in LATER_MODULES for a in node.names)):
            found.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            found += [f"{node.lineno}: {k.arg}=" for k in node.keywords if k.arg in LATER_KEYWORDS]
            if isinstance(node.func, ast.Attribute) and node.func.attr in LATER_METHODS:
                found.append(f"{node.lineno}: .{node.func.attr}()")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for argument in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                if argument.annotation is not None:
                    annotation(argument.annotation)
            if node.returns is not None:
                annotation(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotation(node.annotation)
    return found


@pytest.mark.parametrize("name", MODULES)
def test_a_node_module_needs_nothing_after_python_3_6(name):
    text = resources.files("oddnode.onnode").joinpath(name).read_text(encoding="utf-8")
    tree = ast.parse(text, name, feature_version=OLDEST)  # 3.6's grammar: no walrus, no positional-only
    assert later_than_36(tree) == []


@pytest.mark.parametrize("text, said", [
    ("from dataclasses import dataclass", "from dataclasses"),
    ("import subprocess\nsubprocess.run(['ls'], capture_output=True)", "capture_output="),
    ("def f(x: str | None): pass", "X | Y"),
    ("def f() -> list[str]: pass", "list[...]"),
    ("'ab'.removeprefix('a')", ".removeprefix()"),
    ("from __future__ import annotations", "__future__"),
])
def test_the_check_finds_what_3_6_lacks(text, said):
    assert said in " ".join(later_than_36(ast.parse(text)))
