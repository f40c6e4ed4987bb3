"""Process-wide settings: the glibc malloc arena cap that keeps the driver's memory from growing per thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vla_rl.runtime.process_env import has_avx2

# Six threads malloc and free small blocks at once, then glibc's malloc_info lists one <heap> per arena.
COUNT_ARENAS = textwrap.dedent("""
    import ctypes, os, sys, tempfile, threading
    from vla_rl.runtime.process_env import limit_malloc_arenas
    if sys.argv[1] == "capped":
        assert limit_malloc_arenas()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.fopen.restype = ctypes.c_void_p
    barrier = threading.Barrier(6)
    def work():
        barrier.wait()
        for _ in range(200):
            blocks = [libc.malloc(256) for _ in range(200)]
            for block in blocks:
                libc.free(block)
    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads: thread.start()
    for thread in threads: thread.join()
    path = tempfile.mktemp()
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    print(open(path).read().count("<heap nr="))
""")


def arenas(mode: str) -> int:
    # no MALLOC_ARENA_MAX in the environment: glibc would apply it at start-up, before limit_malloc_arenas()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", COUNT_ARENAS, mode], capture_output=True, text=True, timeout=120,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_arena_cap_holds_threads_to_two_arenas_which_they_otherwise_exceed():
    # MALLOC_ARENA_MAX is read at start-up only: limit_malloc_arenas() applies the cap to a running process
    assert arenas("uncapped") > 2
    assert arenas("capped") <= 2


# ---------------------------------------------------------------- portable numerics
NUMERIC_KEYS = ("VLA_RL_NUMERICS", "ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


@pytest.fixture
def clean_numerics(monkeypatch):
    for key in NUMERIC_KEYS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


@pytest.mark.skipif(not has_avx2(), reason="portable numerics pin AVX2 kernels on x86 CPUs that have them")
def test_portable_numerics_pin_every_library_to_avx2_and_keep_what_the_user_chose(clean_numerics):
    import os

    from vla_rl.runtime.process_env import portable_numerics

    clean_numerics.setenv("MKL_CBWR", "COMPATIBLE")
    chosen = portable_numerics()
    assert chosen == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert os.environ["MKL_CBWR"] == "COMPATIBLE"


def test_native_numerics_set_nothing_and_an_unknown_mode_is_named(clean_numerics):
    import os

    from vla_rl.runtime.process_env import portable_numerics

    clean_numerics.setenv("VLA_RL_NUMERICS", "native")
    assert portable_numerics() == {}
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    clean_numerics.setenv("VLA_RL_NUMERICS", "fast")
    with pytest.raises(ValueError, match="VLA_RL_NUMERICS='fast'.*portable, native"):
        portable_numerics()


REPORT_CAPABILITY = textwrap.dedent("""
    from vla_rl.runtime.process_env import apply_runtime_defaults, numerics_report
    apply_runtime_defaults()
    import torch
    torch.ones(64, 64) @ torch.ones(64, 64)
    print(numerics_report()["torch_cpu_capability"])
""")


@pytest.mark.skipif(not has_avx2(), reason="portable numerics pin AVX2 kernels on x86 CPUs that have them")
def test_a_process_that_applies_the_defaults_computes_with_avx2_kernels():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", REPORT_CAPABILITY], capture_output=True, text=True, timeout=120,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AVX2"
