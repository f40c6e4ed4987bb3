"""What the env and policy conformance kits (:mod:`envs.checks`, :mod:`policies.checks`) share: the error a
failed check raises, naming the check, and the result a kit reports for each check."""

from __future__ import annotations

from dataclasses import dataclass


class ConformanceError(AssertionError):
    """A conformance check failed; ``check`` names it and the message reads ``[check] message``."""

    def __init__(self, check: str, message: str):
        super().__init__(f"[{check}] {message}")
        self.check = check

    @classmethod
    def require(cls, condition: bool, check: str, message: str) -> None:
        """Raise ``cls(check, message)`` unless ``condition``."""
        if not condition:
            raise cls(check, message)


@dataclass
class CheckResult:
    """One check's outcome, as a kit reports it: its ``name``, whether it ``passed``, and a ``detail`` line."""

    name: str
    passed: bool
    detail: str = ""
