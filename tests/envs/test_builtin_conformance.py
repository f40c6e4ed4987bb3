"""The conformance kit over every task of the built-in suite."""

from __future__ import annotations

import pytest

from envs.builtin.tasks import TASKS
from envs.checks import run_checks
from envs.registry import make


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_builtin_task_passes_the_conformance_kit(task):
    passed = []
    run_checks(lambda: make(f"tabletop/{task}", image_size=32), report=lambda r: passed.append(r.passed))
    assert passed and all(passed)
