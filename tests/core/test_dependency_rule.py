"""Arrows point one way. The contract package (``contract``) imports none of the others; the envs and the policies
import only it (never each other, never the core); the core's workers, algorithms, runtime, logging, trainer and
rollout import no env or policy package: they build envs and policies from import paths the entry layer hands
them. Imports inside functions count too, and the import graph of all four packages has no cycle."""

from __future__ import annotations

import ast

import point_env
import pytest

from vla_rl.config import REPO_ROOT
from vla_rl.workers.env_worker import EnvWorker, EnvWorkerConfig

PACKAGES = ("contract", "envs", "policies", "vla_rl")
CORE = ["vla_rl/workers", "vla_rl/algos", "vla_rl/runtime", "vla_rl/logging", "vla_rl/stages/rl/trainer.py",
        "vla_rl/stages/rl/rollout.py", "vla_rl/stages/rl/config.py"]  # fmt: skip
#: package -> the packages it must not import.
FORBIDDEN = {"contract": {"envs", "policies", "vla_rl"}, "envs": {"policies", "vla_rl"},
             "policies": {"envs", "vla_rl"}}  # fmt: skip


def imported_names(path) -> list[str]:
    """Every name an ``import`` or absolute ``from ... import`` of ``path`` may load, at any depth (inside
    functions too): ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (c may be a module)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def module_files() -> dict[str, object]:
    """Dotted module name -> file, for every module of :data:`PACKAGES` (a package is its ``__init__.py``)."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(modules: dict[str, object]) -> dict[str, set[str]]:
    """module -> the modules of ``modules`` it imports. An imported name is the longest module it starts with, and
    importing ``a.b.c`` runs the packages ``a`` and ``a.b`` too; a module's own parent packages (which Python has
    run before it) are left out."""

    def ancestors(name: str) -> list[str]:
        parts = name.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts))]

    graph = {}
    for module, path in modules.items():
        own = {module, *ancestors(module)}
        found = set()
        for name in imported_names(path):
            target = next((n for n in reversed([*ancestors(name), name]) if n in modules), None)
            if target is not None:
                found |= {m for m in (target, *ancestors(target)) if m in modules} - own
        graph[module] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def imported_modules(path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def breaking(files, forbidden: set[str]) -> set[tuple[str, str]]:
    return {(str(path.relative_to(REPO_ROOT)), module) for path in files for module in imported_modules(path)
            if module.split(".")[0] in forbidden}  # fmt: skip


def test_the_core_imports_no_env_or_policy_package():
    files = [p for entry in CORE for p in sorted((REPO_ROOT / entry).rglob("*.py")) or [REPO_ROOT / entry]]
    assert len(files) > 30
    assert not breaking(files, {"envs", "policies"})


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_only_the_packages_below_it(package):
    files = sorted((REPO_ROOT / package).rglob("*.py"))
    assert len(files) >= 3
    assert not breaking(files, FORBIDDEN[package]), sorted(breaking(files, FORBIDDEN[package]))


def test_the_import_graph_has_no_cycle():
    """No two modules import each other, directly or through others, counting imports inside functions: a module
    that both sides need goes into a leaf module of its own instead."""
    graph = import_graph(module_files())
    assert len(graph) > 150
    found = cycles(graph)
    assert not found, "import cycles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(component) for component in found)


def test_the_cycle_finder_names_the_modules_of_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_every_package_is_covered():
    found = {p.parent.name for p in REPO_ROOT.glob("*/__init__.py")}
    assert found - {"tests", "examples", "scripts"} == set(PACKAGES)


made: list[str] = []


def make_counting(name: str, **kwargs):
    """An env factory of our own: what the entry layer could hand a worker instead of the registry's make."""
    made.append(name)
    return point_env.make(name.rpartition("/")[2], **kwargs)


def test_an_env_worker_builds_its_envs_with_the_factory_it_is_given():
    config = EnvWorkerConfig(env_id="points", env_kwargs={"max_episode_steps": 5}, tasks=("reach_red", "reach_blue"),
                             envs_per_stage=2, env_factory=f"{__name__}:make_counting")  # fmt: skip
    worker = EnvWorker(config)
    try:
        assert made == ["points/reach_red", "points/reach_blue"]
        assert worker.reset(0)["state"].shape == (2, 2)
    finally:
        worker.close()


def test_no_script_or_package_reaches_into_the_tests():
    """The product runs without tests/: no script or package imports a test module or puts tests/ on the path."""
    test_modules = {p.stem for p in (REPO_ROOT / "tests").rglob("*.py")} | {"tests", "conftest"}
    files = [p for folder in (*PACKAGES, "scripts") for p in sorted((REPO_ROOT / folder).rglob("*.py"))]
    found = sorted((str(path.relative_to(REPO_ROOT)), module) for path in files for module in imported_modules(path)
                   if module.split(".")[0] in test_modules)  # fmt: skip
    assert not found, found
    assert not [path for path in files if '"tests"' in path.read_text() and "sys.path" in path.read_text()]
