"""Adam state filled in advance (every checkpoint complete) trains exactly as Adam's lazy state."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vla_rl.workers.actor_worker import initialize_adam_state


@pytest.mark.parametrize("amsgrad", [False, True])
def test_prefilled_adam_state_takes_the_same_steps_as_lazy_state(amsgrad):
    torch.manual_seed(0)
    lazy_model, filled_model = nn.Linear(4, 3), nn.Linear(4, 3)
    filled_model.load_state_dict(lazy_model.state_dict())
    lazy = torch.optim.AdamW(lazy_model.parameters(), lr=0.1, amsgrad=amsgrad)
    filled = torch.optim.AdamW(filled_model.parameters(), lr=0.1, amsgrad=amsgrad)
    initialize_adam_state(filled)
    assert len(filled.state) == 2 and len(lazy.state) == 0
    for step in range(4):
        x = torch.randn(5, 4)
        for model, optimizer in ((lazy_model, lazy), (filled_model, filled)):
            optimizer.zero_grad(set_to_none=True)
            model(x).pow(2).sum().backward()
            if step < 2:
                model.bias.grad = None  # the bias has no gradient at first, as a frozen-then-trained part
            optimizer.step()
    for lazy_parameter, filled_parameter in zip(lazy_model.parameters(), filled_model.parameters(), strict=True):
        assert torch.equal(lazy_parameter, filled_parameter)
    assert float(filled.state[filled_model.bias]["step"]) == float(lazy.state[lazy_model.bias]["step"]) == 2.0
