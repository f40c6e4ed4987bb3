"""Process-wide settings: the glibc malloc arena cap that keeps the driver's memory from growing per thread."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def cpu_flags_from_proc() -> set[str]:
    """The CPU's flags, read here (not through vla_rl.runtime.process_env): the skips below must not depend on
    the code they test, else a broken detection skips the very tests that would catch it."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next((set(line.split(":", 1)[1].split()) for line in cpuinfo if line.startswith("flags")), set())
    except OSError:
        return set()


AVX2_X86 = platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= cpu_flags_from_proc()

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


@pytest.mark.skipif(not AVX2_X86, reason="/proc/cpuinfo: not an x86 CPU with AVX2 and FMA")
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


@pytest.mark.skipif(not AVX2_X86, reason="/proc/cpuinfo: not an x86 CPU with AVX2 and FMA")
def test_a_process_that_applies_the_defaults_computes_with_avx2_kernels():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", REPORT_CAPABILITY], capture_output=True, text=True, timeout=120,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AVX2"


# ------------------------------------------------ portable numerics, seen from outside the process
#: What portable numerics pin (docs/platform.md; stated here, not imported).
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

# Each start prints, as JSON on its last line: its own os.environ's pinned keys, a child process's, a Ray
# worker's (with ray_worker=True) and the CPU capability torch computes with. {start} starts the process the
# way the product does.
REPORT_ENVIRONMENTS = textwrap.dedent("""
    import json, os, subprocess, sys
    KEYS = {keys!r}
    {start}
    import torch
    child = subprocess.run([sys.executable, "-c", "import json, os; print(json.dumps({{k: os.environ.get(k) for k in "
                            + repr(KEYS) + "}}))"], capture_output=True, text=True, check=True)
    report = {{"process": {{k: os.environ.get(k) for k in KEYS}}, "child": json.loads(child.stdout),
              "torch": torch.backends.cpu.get_cpu_capability()}}
    if {ray_worker}:
        import ray
        from vla_rl.runtime.ray_cluster import init_ray
        init_ray(num_cpus=1)
        report["ray_worker"] = ray.get(ray.remote(lambda: {{k: os.environ.get(k) for k in KEYS}}).remote())
        ray.shutdown()
    print()
    print(json.dumps(report))
""")
STARTS = {
    # `vla-rl COMMAND`: the console script calls vla_rl.cli.main; the trainer's Ray workers start from there
    "cli": ("from vla_rl.cli import main\nassert main(['config', '--section', 'seed']) == 0", True),
    # pytest: tests/conftest.py runs before any test module (the Ray start is the same code as above)
    "conftest": (f"import runpy\nrunpy.run_path({str(Path(__file__).parents[1] / 'conftest.py')!r})", False),
}


@pytest.mark.skipif(not AVX2_X86, reason="/proc/cpuinfo: not an x86 CPU with AVX2 and FMA")
@pytest.mark.parametrize("start", sorted(STARTS))
def test_portable_numerics_reach_the_environment_of_the_process_its_children_and_ray_workers(tmp_path, start):
    env = {key: value for key, value in os.environ.items() if key not in (*PINNED, "VLA_RL_NUMERICS")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    code, ray_worker = STARTS[start]
    script = REPORT_ENVIRONMENTS.format(keys=tuple(PINNED), start=code, ray_worker=ray_worker)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for where in ("process", "child", "ray_worker")[: 3 if ray_worker else 2]:
        assert report[where] == PINNED, f"{start}: {where} has {report[where]}"
    assert report["torch"] == "AVX2"  # on an AVX-512 CPU torch would otherwise pick AVX512


# A process that serves gRPC (as a remote env's does) while other threads wake often writes and reads back videos:
# every write forks ffmpeg. Prints the failures.
WRITE_VIDEOS_BESIDE_GRPC = textwrap.dedent("""
    import sys, threading, time
    from concurrent import futures
    from vla_rl.runtime.process_env import apply_runtime_defaults
    if sys.argv[1] == "defaults":
        apply_runtime_defaults()
    import grpc, imageio.v2 as imageio, numpy as np
    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_insecure_port("127.0.0.1:0")
    server.start()
    def spin():
        while True:
            time.sleep(0.0005)
    for _ in range(2):
        threading.Thread(target=spin, daemon=True).start()
    frames = np.zeros((5, 32, 32, 3), np.uint8)
    failures = 0
    for i in range(int(sys.argv[3])):
        path = f"{sys.argv[2]}/{i % 4}.mp4"
        try:
            imageio.mimwrite(path, frames, fps=10)
            assert len(imageio.mimread(path)) == 5
        except Exception:
            failures += 1
    print(failures)
""")


def test_videos_written_beside_a_grpc_server_all_decode_with_the_runtime_defaults(tmp_path):
    """Planted without the default (``GRPC_ENABLE_FORK_SUPPORT`` unset), a few of every 40 writes fail."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", WRITE_VIDEOS_BESIDE_GRPC, "defaults", str(tmp_path), "150"],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "0"
