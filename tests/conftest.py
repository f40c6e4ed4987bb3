"""Test-wide settings: offline, headless, and the malloc settings of docs/platform.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

for key, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    "RAY_AUTH_MODE": "disabled",
    "GRPC_ENABLE_FORK_SUPPORT": "false",  # as vla_rl/runtime/process_env.py sets it (gRPC and forked ffmpeg)
    "MALLOC_MMAP_THRESHOLD_": "1000000000",
    "MALLOC_TRIM_THRESHOLD_": "1000000000",
}.items():
    os.environ.setdefault(key, value)

# The CPU kernels `vla-rl` pins (vla_rl/runtime/process_env.py), before anything imports torch: the test
# process and the Ray workers it starts then compute with the same instructions.
from vla_rl.runtime.process_env import portable_numerics  # noqa: E402

portable_numerics()

# Test-only env packages (tests/support) are importable by import path, as a user's own package would be.
SUPPORT = str(Path(__file__).parent / "support")
sys.path.insert(0, SUPPORT)
# ...and in worker processes (Ray workers inherit the environment, not sys.path).
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SUPPORT, os.environ.get("PYTHONPATH", "")) if p)

import pytest  # noqa: E402


@pytest.fixture
def ray_session():
    """The local Ray instance the tests share (6 CPU slots): started by the first test that asks for it and
    kept for the next ones, since a start costs ~5 s; stopped at the end of the run. A test that needs a
    cluster of its own shuts it down (the next test that asks starts it again)."""
    from shared_ray import start_shared_ray

    start_shared_ray()
    yield


@pytest.fixture
def load_script():
    """``load_script("name")``: ``scripts/name.py`` (else ``research/name.py``) imported as a module (neither
    folder is a package)."""
    import importlib.util

    def load(name: str):
        root = Path(__file__).resolve().parents[1]
        path = root / "scripts" / f"{name}.py"
        if not path.is_file():
            path = root / "research" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def pytest_configure(config):
    """Under pytest-xdist, each test process computes with its share of the cores (docs/platform.md: more torch
    threads than cores spin in oneDNN's barriers while the other process works, many times slower)."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // workers))


def pytest_collection_finish(session):
    """Freeze what the imports and the collection left alive (torch, the policies, robosuite, every test module):
    a full garbage collection then skips those objects. robosuite runs one each time an env closes
    (``MjSim.free``), which scans every object of this process: a quarter of a second an env here."""
    import gc

    gc.collect()
    gc.freeze()


#: The folders whose modules take longest (whole training runs through Ray); collected first.
LONGEST_FIRST = ("trainer",)


def pytest_collection_modifyitems(session, config, items):
    """Modules of LONGEST_FIRST before the rest, each module's own order kept: with two test processes
    (``make test``, pytest-xdist handing out a module at a time in this order), a long module started last
    would leave one process idle while the other finishes it."""
    items.sort(key=lambda item: Path(str(item.fspath)).parent.name not in LONGEST_FIRST)


def pytest_sessionfinish(session, exitstatus):
    import ray

    if ray.is_initialized():
        ray.shutdown()


# Before any test renders: torchvision (imported by timm, hence by the policies and by the config checks of
# the policy section) segfaults when imported after MuJoCo's EGL rendering in one process (docs/platform.md).
import policies  # noqa: E402, F401

ARTIFACTS = Path(__file__).parent / "artifacts"
