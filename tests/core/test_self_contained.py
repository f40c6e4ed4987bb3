"""The repository is self-contained: no tracked file cites a platform-notes file or a folder outside it."""

from __future__ import annotations

import subprocess

from vla_rl.config import REPO_ROOT

#: Assembled from parts so that this file does not cite them itself (and needs no exemption).
OUTSIDE_REFERENCES = ("PLATFORM" + "_NOTES", "../" + "shared/", "/work/" + "shared")


def tracked_text_files() -> list:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    suffixes = {".py", ".md", ".yaml", ".toml", ".txt", ".sh", ".cfg", ""}
    return [REPO_ROOT / name for name in listed.stdout.splitlines() if (REPO_ROOT / name).suffix in suffixes]


def test_no_tracked_file_cites_a_file_outside_the_repository():
    files = tracked_text_files()
    assert any(path.name == "Makefile" for path in files)
    offenders = []
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        offenders += [f"{path.relative_to(REPO_ROOT)}: {ref}" for ref in OUTSIDE_REFERENCES if ref in text]
    assert not offenders, "cite docs/platform.md (the repository's own) instead:\n" + "\n".join(offenders)
