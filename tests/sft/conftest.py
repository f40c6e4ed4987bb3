"""A tiny demonstration dataset (2 tasks x 3 expert episodes, 32 px), collected once for the SFT tests."""

from __future__ import annotations

import pytest

# Importing torchvision (through timm) after MuJoCo rendered through EGL in this process segfaults on
# this platform: the policy modules are imported before the dataset fixture renders.
import policies.vla  # noqa: F401
from vla_rl.stages.collect import CollectConfig, collect_demonstrations

TASKS = ["reach", "lift"]
ENV_KWARGS = {"image_size": 32, "cameras": ("front", "wrist")}


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """The folder holding demos.hdf5 and stats.json (valid split: 1 of the 6 episodes)."""
    output = tmp_path_factory.mktemp("sft_demos")
    collect_demonstrations("tabletop", TASKS, ENV_KWARGS, output, CollectConfig(episodes_per_task=3, noise_std=0.005),
                          show_progress=False)  # fmt: skip
    return output


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch thread: the test machine has 2 cores shared with other test runs, and oversubscribed
    OpenMP threads slow the small models here down several-fold."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
