"""No module of the packages is reachable only from tests: each is imported, or named by an import path, on a path
from what users run (the ``vla-rl`` CLI, ``scripts/``, the config files' and pyproject's import paths, the examples).

Edges: ``import`` statements (inside functions too, relative ones resolved) and string constants that are an import
path (``"pkg.module"`` or ``"pkg.module:attribute"``, as registries and ``factory:`` keys hold them)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from vla_rl.config import REPO_ROOT

PACKAGES = ("contract", "envs", "policies", "vla_rl")
IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*(?::[\w.]+)?")


def module_files(root: Path) -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def named(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The dotted names ``tree`` imports or holds as import-path strings."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: None if is_package else -1]
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and IMPORT_PATH.fullmatch(node.value):
            names.add(node.value.partition(":")[0])
    return names


def known(names: Iterable[str], modules: dict[str, Path]) -> set[str]:
    """The modules ``names`` reach: each name's own module and the packages above it."""
    found = set()
    for name in names:
        parts = name.split(".")
        found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules}
    return found


def text_import_paths(paths: Iterable[Path]) -> set[str]:
    return {match.partition(":")[0] for path in paths for match in IMPORT_PATH.findall(path.read_text())}


def reachable(roots: set[str], edges: dict[str, set[str]]) -> set[str]:
    seen, stack = set(), list(roots)
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack += edges.get(module, ())
    return seen


def test_no_module_is_reachable_only_from_tests():
    modules = module_files(REPO_ROOT)
    edges = {name: known(named(ast.parse(path.read_text()), name, path.name == "__init__.py"), modules)
             for name, path in modules.items()}  # fmt: skip
    user_python = [*REPO_ROOT.glob("scripts/*.py"), *REPO_ROOT.glob("examples/**/*.py")]
    user_text = [REPO_ROOT / "pyproject.toml", *REPO_ROOT.glob("configs/**/*.yaml"), *REPO_ROOT.glob("examples/**/*.yaml"),
                 *REPO_ROOT.glob("examples/**/pyproject.toml")]  # fmt: skip
    roots = {"vla_rl.cli"} | known(text_import_paths(user_text), modules)
    for path in user_python:
        roots |= known(named(ast.parse(path.read_text()), path.stem, False), modules)
    assert len(modules) > 100
    only_from_tests = sorted(set(modules) - reachable(roots, edges))
    assert not only_from_tests, f"modules no user path reaches (delete them, or wire them where users expect): {only_from_tests}"


def test_the_walk_finds_a_module_that_nothing_imports(tmp_path):
    """The check can fail: a module that only a test would import is found."""
    (tmp_path / "vla_rl").mkdir()
    (tmp_path / "vla_rl" / "__init__.py").write_text("")
    (tmp_path / "vla_rl" / "cli.py").write_text("from vla_rl import used\nFACTORY = 'vla_rl.named:make'\n")
    for name in ("used", "named", "orphan"):
        (tmp_path / "vla_rl" / f"{name}.py").write_text("")
    modules = {k: v for k, v in module_files(tmp_path).items()}
    edges = {name: known(named(ast.parse(path.read_text()), name, path.name == "__init__.py"), modules)
             for name, path in modules.items()}  # fmt: skip
    assert set(modules) - reachable({"vla_rl.cli"}, edges) == {"vla_rl.orphan"}
