"""The suite mirrors the code: a test module lives under its tier, in the
directory of the package it tests, and borrows only from tests/support,
never from another test module (so any of them can move alone)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.cli import REPOSITORY

TESTS = REPOSITORY / "tests"
PACKAGE = REPOSITORY / "src" / "oddnode"
TIERS = ("unit", "kernels", "testbed")


def python_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if "fixtures" not in path.relative_to(TESTS).parts)


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
    return modules


@pytest.mark.slow
def test_no_module_imports_a_test_module_or_conftest():
    borrowed = {str(path.relative_to(TESTS)): sorted(module for module in imported_modules(path)
                                                    if module.split(".")[0].startswith("test_")
                                                    or module.split(".")[0] == "conftest")
                for path in python_files()}
    assert {path: modules for path, modules in borrowed.items() if modules} == {}


def test_every_test_module_lives_under_its_tier_in_a_package_that_exists():
    """tests/<tier>/<package path below src/oddnode>/test_*.py; a module that
    tests the package as a whole (its layers) sits at its tier's top."""
    tests = [path.relative_to(TESTS) for path in TESTS.rglob("test_*.py")]
    assert tests
    misplaced = [str(path) for path in tests
                 if path.parts[0] not in TIERS or not (PACKAGE / Path(*path.parts[1:-1])).is_dir()]
    assert misplaced == []


def test_test_module_names_are_unique():
    """pytest's default import mode imports a test module by its file name."""
    names = [path.name for path in TESTS.rglob("test_*.py")]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []


def test_support_holds_no_tests():
    assert sorted(str(path.relative_to(TESTS)) for path in (TESTS / "support").rglob("test_*.py")) == []


SHARED_FIXTURES = ("store", "clean")


@pytest.mark.slow
def test_the_shared_fixtures_are_defined_once_in_support():
    """One store fixture and one testbed clean-up, in tests/support: a test
    module that needs another store names its own fixture otherwise."""
    defined = {}
    for path in python_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module-level functions
            if isinstance(node, ast.FunctionDef) and node.name in SHARED_FIXTURES:
                defined.setdefault(node.name, []).append(path.relative_to(TESTS).as_posix())
    assert defined == {"store": ["support/store.py"], "clean": ["support/testbed.py"]}
