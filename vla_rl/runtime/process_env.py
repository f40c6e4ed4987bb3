"""Process-wide defaults that must be set before simulators or hubs are imported."""

from __future__ import annotations

import ctypes
import os
import platform

DEFAULTS = {
    # Headless rendering (docs/platform.md).
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    # Never hang on a model hub that cannot be reached; local paths and packages still load.
    "HF_HUB_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "RAY_AUTH_MODE": "disabled",
    # glibc malloc arenas: see limit_malloc_arenas (the worker processes Ray starts read it from here).
    "MALLOC_ARENA_MAX": "2",
    # gRPC (remote envs; Ray) otherwise runs fork handlers in every child this process forks, and those can kill
    # a child before it execs (ffmpeg writing a video: a broken pipe). No child here uses gRPC after a fork.
    "GRPC_ENABLE_FORK_SUPPORT": "false",
}

#: glibc's mallopt parameter number of M_ARENA_MAX (malloc.h).
M_ARENA_MAX = -8


#: ``VLA_RL_NUMERICS``: "portable" (the default) or "native"; see :func:`portable_numerics`.
NUMERICS_VARIABLE = "VLA_RL_NUMERICS"
NUMERICS_MODES = ("portable", "native")

#: What "portable" sets: each library's CPU kernels pinned to the AVX2 instruction set. Without them,
#: torch (ATen's vectorised kernels), MKL (matrix products) and oneDNN choose the widest instructions the
#: CPU has, and AVX-512 rounds differently from AVX2: the same SFT command gave other weights with AVX-512
#: kernels than with AVX2 ones, and RL amplifies such differences (docs/results.md, 2026-12-05 morning).
#: ``MKL_CBWR`` is MKL's conditional numerical reproducibility: one code path on every AVX2 CPU, AMD or Intel.
PORTABLE_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def apply_runtime_defaults() -> None:
    """Set each default unless the user already chose a value; then :func:`portable_numerics`."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
    portable_numerics()


def cpu_flags() -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (empty where there is none: not Linux)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_avx2() -> bool:
    """Whether this is an x86 CPU with AVX2 and FMA, the instructions :data:`PORTABLE_NUMERICS` pins."""
    return platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= cpu_flags()


def portable_numerics() -> dict[str, str]:
    """Pin the CPU kernels to AVX2 (:data:`PORTABLE_NUMERICS`), so that a run gives the same numbers on any
    x86 machine with AVX2, unless ``VLA_RL_NUMERICS=native`` or the user set a variable already.

    Must run before torch computes anything: the libraries read the variables once. The CLI and the
    worker processes (which inherit the driver's environment) call it first. Returns what it set; nothing on
    a CPU without AVX2 and FMA (forcing AVX2 there would crash) or on another architecture.
    """
    mode = os.environ.get(NUMERICS_VARIABLE, "portable")
    if mode not in NUMERICS_MODES:
        raise ValueError(f"{NUMERICS_VARIABLE}={mode!r}: choose one of {', '.join(NUMERICS_MODES)}")
    if mode == "native" or not has_avx2():
        return {}
    chosen = {key: value for key, value in PORTABLE_NUMERICS.items() if key not in os.environ}
    os.environ.update(chosen)
    return chosen


def numerics_report() -> dict[str, str | None]:
    """Which CPU kernels this process computes with: for ``summary.json``, so a figure names its numerics."""
    import torch

    report: dict[str, str | None] = {"mode": os.environ.get(NUMERICS_VARIABLE, "portable")}
    report["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    report.update({key: os.environ.get(key) for key in PORTABLE_NUMERICS})
    return report


def limit_malloc_arenas() -> bool:
    """Cap this process's glibc malloc arenas at ``MALLOC_ARENA_MAX`` (2 unless set), as the variable would
    have at start-up; False where the C library is not glibc.

    Why: glibc gives threads arenas of their own (up to 8 per core), and with ``MALLOC_TRIM_THRESHOLD_`` set
    high (docs/platform.md) none of them ever returns memory. The driver's in-training evaluation starts a
    video-writer thread each time, and its RSS grew 10-13 MiB per evaluation without a cap, about 1 MiB with
    it (docs/results.md). Call it before threads start: glibc fixes the cap once it makes its ninth arena.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, int(os.environ.get("MALLOC_ARENA_MAX", "2"))))
