"""The floor plan holds: packages import only the layers below them, no two
packages import each other or around a loop, the node scripts use the
standard library alone, and docs/architecture.md draws the same layers."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from oddnode import layers
from support.cli import REPOSITORY

SOURCE = REPOSITORY / "src"
ARCHITECTURE = SOURCE.parent / "docs" / "architecture.md"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(inner) for inner in ast.walk(node))
    return hidden


@dataclass
class Imports:
    """The modules of one top package, which of them are packages, and what each imports."""

    graph: dict[str, set[str]]
    packages: set[str]

    def package_at(self, module: str, depth: int) -> str | None:
        """The package ``depth`` levels below the top holding ``module``, or None
        for a module that sits higher up."""
        parts = module.split(".")
        if len(parts) > depth + 1:
            return ".".join(parts[:depth + 1])
        return module if module in self.packages and len(parts) == depth + 1 else None


def module_imports(root: Path, top: str = "oddnode") -> Imports:
    """Every module under ``root/top`` and the modules of ``top`` it imports,
    at module level or inside functions (``TYPE_CHECKING`` blocks aside);
    ``from package import name`` counts as an import of the submodule when
    there is one, else of the package."""
    modules: dict[str, Path] = {}
    for path in sorted((root / top).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        hidden = _type_checking_nodes(tree)
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in hidden:
                continue
            if isinstance(node, ast.Import):
                targets.update(owner(alias.name) for alias in node.names if alias.name.split(".")[0] == top)
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
                        if node.level else (node.module or ""))
                if base.split(".")[0] == top:
                    targets.update(owner(f"{base}.{alias.name}") for alias in node.names)
        graph[module] = targets - {module}
    return Imports(graph, {module for module, path in modules.items() if path.name == "__init__.py"})


def stdlib_violations(root: Path, package: str) -> list[str]:
    """Imports in ``package`` of anything but the standard library and the package itself."""
    found = []
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith(package) \
                        and name != "__future__":
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def layer_violations(imports: Imports, rank: dict[str, int]) -> list[str]:
    """Imports from a package into one that is not in a lower layer, and
    packages missing from the layers.  The top's own modules (the version,
    the layer list, the entry point) may import any package."""
    found = []
    for module, targets in sorted(imports.graph.items()):
        package = imports.package_at(module, 1)
        if package is None:
            continue
        name = package.split(".")[1]
        if name not in rank:
            found.append(f"{module}: package {name} is in no layer")
            continue
        for target in sorted(targets):
            other = imports.package_at(target, 1)
            if other is None:
                found.extend(f"{module} imports {target}, which imports {t}" for t in sorted(imports.graph[target]))
                continue
            other_name = other.split(".")[1]
            if other_name == name:
                continue
            if other_name not in rank:
                found.append(f"{module} imports {target}: package {other_name} is in no layer")
            elif rank[other_name] >= rank[name]:
                relation = "its own layer" if rank[other_name] == rank[name] else "a layer above"
                found.append(f"{module} imports {target}, from {relation} ({name} -> {other_name})")
    return found


def package_cycles(imports: Imports, depth: int) -> list[list[str]]:
    """Loops among sibling packages ``depth`` levels down (subpackages of one
    parent; the parent's own modules aside)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports.graph.items():
        source = imports.package_at(module, depth)
        for target in targets:
            other = imports.package_at(target, depth)
            if source and other and source != other and source.rsplit(".", 1)[0] == other.rsplit(".", 1)[0]:
                edges[source].add(other)
    cycles, seen = [], set()
    for start in sorted(edges):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start and frozenset(path) not in seen:
                    seen.add(frozenset(path))
                    cycles.append(path + [start])
                elif nxt not in path and len(path) < 12:
                    stack.append((nxt, path + [nxt]))
    return cycles


@pytest.fixture(scope="module")
def imports() -> Imports:
    """The source's import graph, parsed once for the tests that read it
    (not at collection, which every test run pays)."""
    return module_imports(SOURCE)


def test_every_package_sits_in_one_layer():
    packages = {path.parent.name for path in (SOURCE / "oddnode").glob("*/__init__.py")}
    named = [name for layer in layers.LAYERS for name, _ in layer]
    assert len(named) == len(set(named)), named
    assert packages == set(named)


def test_packages_import_only_the_layers_below(imports):
    assert layer_violations(imports, layers.rank()) == []


def test_no_packages_import_each_other_at_any_depth(imports):
    for depth in (1, 2, 3):
        assert package_cycles(imports, depth) == [], depth


def test_the_node_scripts_use_the_standard_library_alone():
    for package in layers.STANDARD_LIBRARY_ONLY:
        assert stdlib_violations(SOURCE, f"oddnode.{package}") == []


def test_the_version_and_the_layer_list_import_nothing_of_ours(imports):
    for module in ("oddnode", "oddnode.layers"):
        assert imports.graph[module] == set(), module


def sql_outside(root: Path, owner: str) -> list[str]:
    """Uses of DuckDB (importing it, or a store's connection ``.con``) in
    modules outside the package ``owner``."""
    found = []
    for path in sorted((root / "oddnode").rglob("*.py")):
        if path.relative_to(root).parts[:2] == ("oddnode", owner):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            imported = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                        [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] == "duckdb" for name in imported) or \
                    isinstance(node, ast.Attribute) and node.attr == "con":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


@pytest.mark.slow
@pytest.mark.slow
def test_sql_lives_in_the_store_alone():
    assert sql_outside(SOURCE, "store") == []


def test_the_architecture_document_draws_these_layers():
    assert layers.render() in ARCHITECTURE.read_text(encoding="utf-8")


# --- the checks themselves, on a small package with every fault --------------


@pytest.fixture
def faulty(tmp_path):
    tree = {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "import json\nfrom pkg.high import b  # upward\n",
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": ("from typing import TYPE_CHECKING\nfrom pkg.low import a\n"
                          "if TYPE_CHECKING:\n    from pkg.side import c\n"),
        "pkg/side/__init__.py": "",
        "pkg/side/c.py": "def f():\n    from ..low import a\n    import numpy\n",
    }
    for name, text in tree.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_checks_find_an_upward_import_a_loop_a_lazy_import_and_a_foreign_library(faulty):
    imports = module_imports(faulty, top="pkg")
    assert imports.graph["pkg.low.a"] == {"pkg.high.b"}
    assert imports.graph["pkg.high.b"] == {"pkg.low.a"}  # the TYPE_CHECKING import aside
    assert imports.graph["pkg.side.c"] == {"pkg.low.a"}  # relative, inside a function
    assert layer_violations(imports, {"low": 0, "high": 1, "side": 1}) == [
        "pkg.low.a imports pkg.high.b, from a layer above (low -> high)"]
    assert package_cycles(imports, 1) == [["pkg.high", "pkg.low", "pkg.high"]]
    assert stdlib_violations(faulty, "pkg.side") == ["pkg/side/c.py:3 imports numpy"]


def test_the_sql_check_finds_a_connection_used_outside_the_store(tmp_path):
    for name, text in {"oddnode/store/db.py": "import duckdb\n", "oddnode/judge/a.py": "import duckdb.typing\n",
                       "oddnode/measure/b.py": "def f(store):\n    return store.con.execute('SELECT 1')\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sql_outside(tmp_path, "store") == ["oddnode/judge/a.py:1", "oddnode/measure/b.py:2"]
