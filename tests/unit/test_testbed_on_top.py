"""The testbed is the top layer: the command line (oddnode.app) imports
nothing of it, and reaches the testbed only through the provider the
entry point (oddnode.main) registers for --testbed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import oddnode.app
import oddnode.main  # registers the testbed, before a test here takes it away and puts it back
from oddnode.app.cli import build_app, common

TESTBED = "oddnode.testbed"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module a source file imports, anywhere in it (inside functions
    too), as absolute names with their line; ``from A import b`` counts as
    A and A.b, since b may be a module; ``importlib.import_module`` and
    ``__import__`` with a literal name count too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names.append((node.lineno, base))
            names += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if function in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.append((node.lineno, node.args[0].value))
    return names


def test_nothing_under_app_imports_the_testbed():
    root = Path(oddnode.app.__file__).parent.parent  # src/oddnode
    upward = [f"{path.relative_to(root)}:{line}: {name}"
              for path in sorted((root / "app").rglob("*.py"))
              for line, name in imported_modules(path, root)
              if name == TESTBED or name.startswith(TESTBED + ".")]
    assert upward == []


def test_the_import_walk_sees_lazy_relative_and_from_imports(tmp_path):
    """The walk above would catch each way of importing the testbed."""
    package = tmp_path / "oddnode" / "app" / "cli"
    package.mkdir(parents=True)
    source = package / "probe.py"
    source.write_text("from oddnode import testbed\n"
                      "def lazy():\n    import oddnode.testbed.cgroups\n"
                      "    from ...testbed import Testbed\n"
                      "    importlib.import_module('oddnode.testbed.lifecycle')\n")
    names = [name for _, name in imported_modules(source, tmp_path / "oddnode")]
    assert {"oddnode.testbed", "oddnode.testbed.cgroups", "oddnode.testbed.Testbed",
            "oddnode.testbed.lifecycle"} <= set(names)


@pytest.mark.parametrize("args", [["inventory", "--testbed"], ["check", "--testbed"],
                                  ["pairs", "--testbed"], ["sets", "--testbed"]])
def test_testbed_option_without_a_provider_says_none_is_loaded(monkeypatch, tmp_path, args):
    monkeypatch.setattr(common, "testbed_provider", None)
    app = build_app()  # the command line alone, as a site might build it without the testbed
    result = CliRunner().invoke(app, [*args, "--db", str(tmp_path / "odd.duckdb")])
    assert result.exit_code == 3, result.output  # could not run, not a defect
    text = " ".join(result.output.split())
    assert "--testbed: no testbed support is loaded" in text and "Traceback" not in text
    assert "testbed" not in typer.main.get_command(app).commands


def test_the_entry_point_registers_the_testbed_and_its_commands():
    from oddnode.testbed.cli import TestbedProvider

    assert isinstance(common.testbed_provider, TestbedProvider)
    root = typer.main.get_command(oddnode.main.app)
    names = root.list_commands(typer.Context(root))
    assert names[-2:] == ["testbed", "config"]  # where the help has always listed it
