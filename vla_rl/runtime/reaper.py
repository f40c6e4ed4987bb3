"""Fate sharing for a local Ray: when the driver dies, even by ``kill -9``, its Ray processes die too.

A driver that starts a local Ray gets a reaper: a small process in its own session that watches
the driver, remembers the driver's descendants (Ray's GCS, raylet, agents and workers), and
kills those still alive once the driver is gone. Without it, ``kill -9`` of the driver left
Ray's dashboard and runtime-env agents running for over a minute. A normal exit or SIGTERM
shuts Ray down first (``ray.shutdown``), so the reaper then finds nothing left to kill.

Run as ``python -m vla_rl.runtime.reaper DRIVER_PID``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

POLL_SECONDS = 0.5
#: Seconds a reaped process gets to exit on SIGTERM before SIGKILL.
GRACE_SECONDS = 2.0


def start_reaper(driver_pid: int) -> subprocess.Popen:
    """Start the reaper of ``driver_pid`` (detached: a signal to the driver's group does not reach it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "vla_rl.runtime.reaper", str(driver_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def descendants(driver: psutil.Process) -> dict[int, psutil.Process]:
    """The driver's living descendants, except this reaper (the driver's child too)."""
    try:
        return {child.pid: child for child in driver.children(recursive=True) if child.pid != os.getpid()}
    except psutil.Error:
        return {}


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def watch(driver_pid: int) -> list[int]:
    """Wait for ``driver_pid`` to end, then end the descendants it had; returns the pids it ended."""
    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:
        return []
    known: dict[int, psutil.Process] = {}
    while _alive(driver):
        known.update(descendants(driver))
        known = {pid: process for pid, process in known.items() if process.is_running()}
        time.sleep(POLL_SECONDS)
    alive = [process for process in known.values() if process.is_running()]  # is_running checks the pid's start time
    for process in alive:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, still_alive = psutil.wait_procs(alive, timeout=GRACE_SECONDS)
    for process in still_alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    return [process.pid for process in alive]


if __name__ == "__main__":
    watch(int(sys.argv[1]))
