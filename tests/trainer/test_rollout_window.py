"""rows_without_episode_end: the check that the rollout window shows every env an episode end."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from vla_rl.runtime.seeds import derived_seed
from vla_rl.stages.rl.rollout import rows_without_episode_end


def _batch(terminated, truncated, mask=None):
    terminated = torch.tensor(terminated, dtype=torch.bool)
    truncated = torch.tensor(truncated, dtype=torch.bool)
    mask = torch.ones_like(terminated) if mask is None else torch.tensor(mask, dtype=torch.bool)
    return TensorDict({"terminated": terminated, "truncated": truncated, "mask": mask}, batch_size=terminated.shape)


def test_counts_rows_that_never_terminate_or_truncate():
    batch = _batch(
        terminated=[[0, 1, 0], [0, 0, 0], [0, 0, 0], [1, 0, 1]],
        truncated=[[0, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0]],
    )
    assert rows_without_episode_end(batch) == 1


def test_an_end_on_a_masked_step_does_not_count():
    batch = _batch(terminated=[[0, 0, 1], [1, 0, 0]], truncated=[[0, 0, 0], [0, 0, 0]], mask=[[1, 1, 0], [1, 1, 1]])
    assert rows_without_episode_end(batch) == 1


def test_random_batches_match_a_python_loop():
    generator = torch.Generator().manual_seed(derived_seed("window"))
    for _ in range(20):
        terminated = (torch.rand(6, 5, generator=generator) < 0.1).tolist()
        truncated = (torch.rand(6, 5, generator=generator) < 0.1).tolist()
        expected = sum(not any(a or b for a, b in zip(row_a, row_b, strict=True))
                       for row_a, row_b in zip(terminated, truncated, strict=True))  # fmt: skip
        assert rows_without_episode_end(_batch(terminated, truncated)) == expected
