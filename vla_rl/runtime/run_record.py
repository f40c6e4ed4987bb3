"""``run.json``: the record of one `vla-rl train|sft|eval|collect` run, in its run folder.

It holds what a reader needs to rerun the command and to judge its numbers: the command line, the composed
config, the git commit of the code (dirty or not, and the hash of ``git diff HEAD``), Python and package
versions, the numerics mode and CPU flags, the machine, the seeds, the evaluation protocol, the plan the run
was made for (``record.plan``), and start, end and stage times. It is written when the command starts
(``status: running``), after each stage, and at the end (``completed`` or ``failed``), each time to a
temporary name and renamed. `vla-rl reproduce` reruns a record (:mod:`vla_rl.commands.reproduce`).
docs/reproducibility.md describes every field.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from contract.config_reader import check_types
from vla_rl.runtime.files import write_json_atomic

RECORD_FILE = "run.json"
SCHEMA = "vla-rl/run-record"
VERSION = 1
#: Each recorded command and the config key of the folder it writes into (its run folder).
FOLDER_KEYS = {"train": "run_dir", "eval": "eval.output", "sft": "sft.output", "collect": "collect.output"}
#: The packages whose versions a record names (absent ones are recorded as null).
PACKAGES = ("vla-rl", "torch", "numpy", "mujoco", "robosuite", "metaworld", "ray", "transformers", "diffusers",
            "gymnasium", "hydra-core", "omegaconf", "tensordict", "peft", "timm")  # fmt: skip
#: Environment variables that change what a run computes or where it runs.
ENVIRONMENT_PREFIXES = ("VLA_RL_", "ATEN_", "MKL_", "ONEDNN_", "OMP_", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED",
                        "MALLOC_", "MUJOCO_GL", "CUBLAS_WORKSPACE_CONFIG")  # fmt: skip
REPO_ROOT = Path(__file__).resolve().parents[2]


class RecordError(ValueError):
    """A run record that cannot be read or a plan that cannot be recorded; the message says what to do."""


@dataclass
class RecordConfig:
    """``record``.

    - ``plan``: the committed plan of the study this run belongs to (``docs/results/<study>/plan.md``); the
      record names it and the commit that last touched it. ``+plan=PATH`` on the command line says the same. The command refuses to start when the file is
      untracked or has uncommitted changes: a plan is written down before its runs.
    """

    plan: str | None = None

    def __post_init__(self) -> None:
        check_types(self)


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The checkout of the running code: ``commit``, ``dirty``, ``diff_sha256`` (of ``git diff HEAD --binary``),
    ``untracked`` files (not ignored ones) and ``untracked_sha256`` (their names and contents); ``commit`` null and ``note`` saying why where ``root`` is not a git checkout."""
    try:
        head = _git(root, "rev-parse", "HEAD")
    except OSError as error:  # no git program
        return {"checkout": str(root), "commit": None, "dirty": None, "diff_sha256": None, "untracked": [],
                "untracked_sha256": None, "note": f"git is not available ({error})"}  # fmt: skip
    if head.returncode != 0:
        return {"checkout": str(root), "commit": None, "dirty": None, "diff_sha256": None, "untracked": [],
                "untracked_sha256": None, "note": f"not a git checkout: {root}"}  # fmt: skip
    diff = _git(root, "diff", "HEAD", "--binary").stdout
    untracked = _git(root, "ls-files", "--others", "--exclude-standard").stdout.decode().splitlines()
    return {
        "checkout": str(root),
        "commit": head.stdout.decode().strip(),
        "dirty": bool(diff) or bool(untracked),
        "diff_sha256": hashlib.sha256(diff).hexdigest() if diff else None,
        "untracked": untracked[:200],
        "untracked_sha256": _files_sha256(root, untracked) if untracked else None,
    }


def _files_sha256(root: Path, names: list[str], largest: int = 1 << 20) -> str:
    """One hash of the names and contents of ``names`` (files over ``largest`` bytes: name and size only)."""
    digest = hashlib.sha256()
    for name in sorted(names):
        path = root / name
        digest.update(name.encode() + b"\0")
        try:
            size = path.stat().st_size
            digest.update(path.read_bytes() if size <= largest else f"size {size}".encode())
        except OSError:
            digest.update(b"unreadable")
        digest.update(b"\0")
    return digest.hexdigest()


def plan_state(plan: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """``path`` (relative to the checkout), ``commit`` that last touched it, its date and ``sha256``.

    Raises:
        RecordError: the plan is missing, outside the checkout, untracked or has uncommitted changes.
    """
    path = Path(plan).expanduser().resolve()
    if not path.is_file():
        raise RecordError(f"'record.plan': {plan} does not exist; write the plan (docs/results/PLAN_TEMPLATE.md) "
                          "and commit it before the run")  # fmt: skip
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        raise RecordError(f"'record.plan': {root} is not a git checkout, so {plan} cannot be shown to precede "
                          "the run; run from a clone of the repository")  # fmt: skip
    try:
        relative = path.relative_to(root.resolve())
    except ValueError:
        raise RecordError(f"'record.plan': {path} lies outside the checkout {root}; put the plan under "
                          "docs/results/<study>/plan.md and commit it") from None  # fmt: skip
    if _git(root, "ls-files", "--error-unmatch", "--", str(relative)).returncode != 0:
        raise RecordError(f"'record.plan': {relative} is not committed; commit it before the run "
                          f"(git add {relative} && git commit)")  # fmt: skip
    if _git(root, "status", "--porcelain", "--", str(relative)).stdout.strip():
        raise RecordError(f"'record.plan': {relative} has uncommitted changes; commit them before the run "
                          "(the record names the commit of the plan it ran for)")  # fmt: skip
    commit, _, date = _git(root, "log", "-1", "--format=%H %cI", "--", str(relative)).stdout.decode().strip().partition(" ")
    return {"path": str(relative), "commit": commit, "committed": date,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}  # fmt: skip


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpus() -> list[dict[str, str]]:
    """The NVIDIA GPUs ``nvidia-smi`` lists (name, memory, driver); empty without one. Asking nvidia-smi,
    not torch, keeps CUDA uninitialised in the driver."""
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False, timeout=20,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listed.returncode != 0:
        return []
    rows = [[part.strip() for part in line.split(",")] for line in listed.stdout.splitlines() if line.strip()]
    return [{"name": r[0], "memory": r[1], "driver": r[2]} for r in rows if len(r) == 3]


def machine() -> dict[str, Any]:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"hostname": platform.node(), "os": platform.platform(), "arch": platform.machine(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cpus_usable": usable, "memory_bytes": memory,
            "gpus": gpus()}  # fmt: skip


def numerics() -> dict[str, Any]:
    """:func:`~vla_rl.runtime.process_env.numerics_report` and the CPU's feature flags."""
    from vla_rl.runtime.process_env import cpu_flags, numerics_report

    return {**numerics_report(), "cpu_flags": sorted(cpu_flags())}


def environment() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENVIRONMENT_PREFIXES)}


def folder_of(cfg: Any, command: str) -> Path:
    """The run folder of ``command``: the folder its :data:`FOLDER_KEYS` key names."""
    from omegaconf import OmegaConf

    return Path(str(OmegaConf.select(cfg, FOLDER_KEYS[command])))


class RunRecord:
    """The ``run.json`` of one command; :meth:`start`, then :meth:`stage_done` per stage, then :meth:`finish`.

    ``cfg``: the composed config (recorded, and where the folder and ``record.plan`` are read); ``seeds``: the seeds
    the run derives its randomness from, by key (the caller reads them from its run plan).
    """

    def __init__(self, command: str, argv: list[str], cfg: Any, seeds: dict[str, int], folder: Path | None = None):
        from omegaconf import OmegaConf

        if command not in FOLDER_KEYS:
            raise ValueError(f"no run record for command {command!r}; recorded: {', '.join(FOLDER_KEYS)}")
        self.folder = Path(folder) if folder is not None else folder_of(cfg, command)
        self.path = self.folder / RECORD_FILE
        self.cfg = cfg
        self.document: dict[str, Any] = {
            "schema": SCHEMA,
            "version": VERSION,
            "command": command,
            "argv": list(argv),
            "command_line": shlex.join(["vla-rl", *argv]),
            "cwd": os.getcwd(),
            "folder": str(self.folder),
            "folder_key": FOLDER_KEYS[command],
            "status": "running",
            "error": None,
            "started": utc_now(),
            "finished": None,
            "wall_seconds": None,
            "stage_seconds": {},
            "outputs": {},
            "git": None,
            "plan": None,
            "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                       "executable": sys.executable},  # fmt: skip
            "packages": {},
            "numerics": {},
            "machine": {},
            "environment": {},
            "seeds": dict(seeds),
            "evaluation": None,
            "config": OmegaConf.to_container(cfg, resolve=True),
        }

    def start(self, resume: bool = False, evaluation: dict[str, Any] | None = None) -> RunRecord:
        """Check the plan, gather the facts, write ``run.json`` (``status: running``).

        ``resume``: the command continues an earlier run of this folder; its record is kept as ``resumed_from``.
        ``evaluation``: how the command evaluates (split, seeds, ...; the entry layer knows the env's tasks).

        Raises:
            RecordError: ``record.plan`` is set but not committed (nothing is written then).
        """
        from omegaconf import OmegaConf

        plan, shorthand = OmegaConf.select(self.cfg, "record.plan"), OmegaConf.select(self.cfg, "plan")
        if plan and shorthand and str(plan) != str(shorthand):
            raise RecordError(f"'record.plan'={plan!r} and '+plan'={shorthand!r} name different plans; give one")
        plan = plan or shorthand
        document = self.document
        document["git"] = git_state()
        document["plan"] = plan_state(str(plan)) if plan else None
        document["packages"] = package_versions()
        document["numerics"] = numerics()
        document["machine"] = machine()
        document["environment"] = environment()
        document["evaluation"] = evaluation
        if resume and self.path.is_file():
            document["resumed_from"] = json.loads(self.path.read_text())
        self._started = datetime.datetime.now(datetime.timezone.utc)
        self.write()
        return self

    def stage_done(self, stage: str, seconds: float) -> None:
        self.document["stage_seconds"][stage] = seconds
        self.write()

    def add_output(self, name: str, path: Path) -> None:
        """Name an output file (stored relative to the run folder)."""
        self.document["outputs"][name] = os.path.relpath(Path(path).resolve(), self.folder.resolve())

    def finish(self, error: BaseException | None = None) -> None:
        finished = datetime.datetime.now(datetime.timezone.utc)
        self.document["finished"] = finished.isoformat(timespec="seconds")
        self.document["wall_seconds"] = (finished - self._started).total_seconds()
        self.document["status"] = "completed" if error is None else "failed"
        if error is not None:
            self.document["error"] = f"{type(error).__name__}: {error}"
        self.write()

    def write(self) -> None:
        write_json_atomic(self.path, self.document, default=str)


def read_record(record_or_folder: str | Path) -> tuple[dict[str, Any], Path]:
    """The record at ``record_or_folder`` (a run.json, or a folder holding one) and its path.

    Raises:
        RecordError: no such file, not JSON, or not a vla-rl run record of a known version.
    """
    path = Path(record_or_folder)
    if path.is_dir():
        path = path / RECORD_FILE
    if not path.is_file():
        raise RecordError(f"{path} does not exist; give a run.json or the run folder holding one (every "
                          "`vla-rl train|sft|eval|collect` writes it)")  # fmt: skip
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise RecordError(f"{path} is not JSON ({error})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise RecordError(f"{path} is not a vla-rl run record (its 'schema' is not {SCHEMA!r})")
    if document.get("version") != VERSION:
        raise RecordError(f"{path}: run record version {document.get('version')!r}; this vla-rl reads "
                          f"version {VERSION}")  # fmt: skip
    for key in ("command", "argv", "folder_key", "git", "config"):
        if key not in document:
            raise RecordError(f"{path}: run record lacks the field '{key}'")
    return document, path
