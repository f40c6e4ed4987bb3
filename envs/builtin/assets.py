"""Locating and loading the MJCF files of the tabletop suite.

Assets live in ``<repo>/assets/tabletop`` unless the environment variable ``VLA_RL_ASSETS`` names
another assets root (the folder that contains ``tabletop/``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import mujoco

ASSETS_ENV_VAR = "VLA_RL_ASSETS"
SCENE_FILE = "scene.xml"
_INCLUDE = re.compile(r"<include\s+file=\"([^\"]+)\"")


def tabletop_asset_dir() -> Path:
    """The folder holding ``scene.xml`` and the files it includes."""
    root = os.environ.get(ASSETS_ENV_VAR)
    base = Path(root).expanduser().resolve() if root else Path(__file__).resolve().parents[2] / "assets"
    return base / "tabletop"


def required_files(scene_path: Path) -> list[Path]:
    """``scene_path`` and every file it includes (recursively), as absolute paths."""
    files = [scene_path]
    for name in _INCLUDE.findall(scene_path.read_text()):
        included = (scene_path.parent / name).resolve()
        files.append(included)
    return files


def load_tabletop_model() -> mujoco.MjModel:
    """Compile the tabletop scene.

    Raises:
        FileNotFoundError: a scene file is missing; the message names its full path.
    """
    asset_dir = tabletop_asset_dir()
    scene_path = asset_dir / SCENE_FILE
    hint = f"reinstall the assets or point ${ASSETS_ENV_VAR} at a folder containing tabletop/{SCENE_FILE}"
    if not scene_path.is_file():
        raise FileNotFoundError(f"tabletop scene file not found: {scene_path} ({hint})")
    for path in required_files(scene_path):
        if not path.is_file():
            raise FileNotFoundError(
                f"tabletop asset file not found: {path} (included by {scene_path}; {hint})"
            )
    return mujoco.MjModel.from_xml_path(str(scene_path))
