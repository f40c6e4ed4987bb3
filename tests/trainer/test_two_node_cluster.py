"""Scale-out without code changes: a two-node Ray cluster on this machine (`ray start --head` and a second
`ray start --address` with a resource of its own); `trainer.placement` puts the env workers on the second
node, and two iterations train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest
import ray
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.config.loading import load_config
from vla_rl.runtime.distributed import free_port
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.run_plan import read_run_plan

RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture
def two_node_cluster():
    """A head node (3 CPUs) and a second node (2 CPUs and 2 units of `sim_node`); yields the address."""
    if ray.is_initialized():
        ray.shutdown()
    temp_dir = tempfile.mkdtemp(prefix="vr", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    port = free_port()
    environment = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--disable-usage-stats", f"--temp-dir={temp_dir}"]

    def start(*arguments: str) -> None:
        subprocess.run([RAY, "start", *arguments, *common], env=environment, check=True, capture_output=True,
                       timeout=120)  # fmt: skip

    try:
        start("--head", f"--port={port}", "--num-cpus=3", "--include-dashboard=false")
        start(f"--address=127.0.0.1:{port}", "--num-cpus=2", '--resources={"sim_node": 2}')
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for process in psutil.process_iter(["cmdline"]):  # only this cluster's processes, not other Rays
            if temp_dir in " ".join(process.info["cmdline"] or []):
                process.kill()


def node_of(actor) -> str:
    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))


def test_env_workers_placed_on_the_second_node_train_two_iterations(two_node_cluster, tmp_path):
    cfg = load_config([*TINY, "trainer.iterations=2", f"trainer.ray_address={two_node_cluster}",
                       "trainer.num_env_workers=2", "+trainer.placement.env_worker={sim_node: 1}"])  # fmt: skip
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path) as trainer:
        nodes = {node["NodeID"]: node["Resources"] for node in ray.nodes() if node["Alive"]}
        assert len(nodes) == 2
        sim_node = next(node for node, resources in nodes.items() if "sim_node" in resources)
        assert [node_of(worker) for worker in trainer.collector.env_group.workers] == [sim_node, sim_node]
        assert node_of(trainer.rollout_worker) != sim_node  # the other groups asked for no sim_node
        state = trainer.fit()
    assert state.iteration == 2
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2] and rows[-1]["train/env_steps"] > 0
