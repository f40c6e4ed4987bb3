"""`vla-rl reproduce RECORD_OR_FOLDER`: rerun a recorded run into a new folder and compare the results.

The record (``run.json``, :mod:`vla_rl.runtime.run_record`) names the command line; the rerun is that command
(for a resumed run, its parts' command run once, uninterrupted) with its run folder moved (``run_dir=``, ``eval.output=``, ``sft.output=`` or ``collect.output=``). It refuses
to start when this checkout's commit or uncommitted diff differs from the record's (``--allow-commit-mismatch``
goes on anyway), or when the numerics mode differs. Exit status: 0 when the new results are identical to the
recorded ones, 1 when they differ (the differences are listed), 2 when it could not rerun.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

from vla_rl.commands.common import add_config_dir_argument


def _key_of(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def rerun_argv(record: dict[str, Any], folder: Path) -> list[str]:
    """The recorded command line, uninterrupted (:func:`uninterrupted_argv`), with its run folder set to ``folder``
    (earlier settings of it dropped)."""
    key = record["folder_key"]
    return [*_without({key}, uninterrupted_argv(record)), f"{key}={folder}"]


def _without(keys: set[str], argv: list[str]) -> list[str]:
    return [a for a in argv if not ("=" in a and not a.startswith("-") and _key_of(a) in keys)]


def uninterrupted_argv(record: dict[str, Any]) -> list[str]:
    """The command line that reruns a run, resumed or not, as one uninterrupted run.

    A run continued with ``trainer.resume=true`` (``sft.resume=true`` for `vla-rl sft`) keeps the records of its
    earlier parts (``resumed_from``). Resuming is exact, so when every part ran the same command (the resume
    aside) on the same code, the uninterrupted command reproduces the whole run. The parts' run folders may differ (a folder moved or copied
    between them); the rerun names its own.

    Raises:
        ValueError: the parts ran different command lines or code; says which.
    """
    parts = [record]
    while isinstance(parts[-1].get("resumed_from"), dict):
        parts.append(parts[-1]["resumed_from"])
    ignored = {"trainer.resume", "sft.resume", record["folder_key"]}
    argv = _without({"trainer.resume", "sft.resume"}, record["argv"])
    for number, part in enumerate(reversed(parts[1:]), start=1):
        if _without(ignored, part.get("argv", [])) != _without(ignored, argv):
            raise ValueError(f"part {number} of this resumed run ran `{' '.join(part.get('argv', []))}`, the last "
                             f"part `{' '.join(record['argv'])}`: rerun each part and its resumption by hand")  # fmt: skip
        if part.get("git") != record.get("git"):
            raise ValueError(f"part {number} of this resumed run ran other code (git {part.get('git')}) than the last "
                             f"part (git {record.get('git')}): rerun each part on its own code by hand")  # fmt: skip
    return argv


def pinned_iterations(record: dict[str, Any], original: Path) -> list[str]:
    """Overrides that rerun exactly as many RL iterations as the recorded run ran, with no time limit.

    ``trainer.time_limit_minutes`` stops RL by the clock, so a rerun on a slower or busier machine would stop
    earlier. The iteration count changes no computation but where the loop ends, so pinning it reproduces the
    run; empty when the run had no time limit or its summary names no RL iterations.
    """
    limit = ((record.get("config") or {}).get("trainer") or {}).get("time_limit_minutes")
    summary_path = original / "summary.json"
    if limit is None or not summary_path.is_file():
        return []
    iterations = json.loads(summary_path.read_text()).get("rl_iterations")
    if iterations is None:
        return []
    return [f"trainer.iterations={int(iterations)}", "trainer.time_limit_minutes=null"]


def checkout_mismatches(record: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Why this checkout's code may differ from the recorded run's (commit, uncommitted diff); empty if it matches."""
    recorded = record["git"] or {}
    if recorded.get("commit") is None:
        return [f"the record names no commit ({recorded.get('note', 'no git information')})"]
    if current.get("commit") is None:
        return [f"this code is not in a git checkout ({current.get('note')}), so its commit cannot be checked"]
    found = []
    if recorded["commit"] != current["commit"]:
        found.append(f"commit: the record's {recorded['commit'][:12]}, this checkout's {current['commit'][:12]} "
                     f"(git checkout {recorded['commit'][:12]} to rerun the recorded code)")  # fmt: skip
    if recorded.get("diff_sha256") != current.get("diff_sha256"):
        found.append(f"uncommitted changes (git diff HEAD): the record's hash {recorded.get('diff_sha256')}, this "
                     f"checkout's {current.get('diff_sha256')} (None: no changes)")  # fmt: skip
    if recorded.get("untracked_sha256") != current.get("untracked_sha256"):
        found.append(f"untracked files (not ignored): the record's {len(recorded.get('untracked') or [])} files "
                     f"(hash {recorded.get('untracked_sha256')}), this checkout's {len(current.get('untracked') or [])}"
                     f" (hash {current.get('untracked_sha256')})")  # fmt: skip
    return found


def numerics_mismatch(record: dict[str, Any]) -> str | None:
    from vla_rl.runtime.process_env import NUMERICS_VARIABLE

    recorded = (record.get("numerics") or {}).get("mode")
    current = os.environ.get(NUMERICS_VARIABLE, "portable")
    if recorded and recorded != current:
        return (f"the run computed with {NUMERICS_VARIABLE}={recorded}, this process with {current}; rerun as "
                f"`{NUMERICS_VARIABLE}={recorded} vla-rl reproduce ...`")  # fmt: skip
    return None


def default_folder(record: dict[str, Any]) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(f"{str(record['folder']).rstrip('/')}-reproduce-{stamp}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    from vla_rl.cli import main
    from vla_rl.runtime.run_compare import COMPARED, RunFolderError, differences
    from vla_rl.runtime.run_record import RecordError, git_state, read_record

    try:
        record, record_path = read_record(args.record)
    except RecordError as error:
        print(f"vla-rl reproduce: {error}", file=sys.stderr)
        return 2
    command = record["command"]
    original = record_path.parent  # the results next to the record: its run folder, or a published copy of it
    if record.get("status") != "completed":
        print(f"vla-rl reproduce: {record_path} is the record of a run that did not complete (status "
              f"{record.get('status')!r}); there is nothing to compare with", file=sys.stderr)  # fmt: skip
        return 2
    try:
        uninterrupted_argv(record)
    except ValueError as error:
        print(f"vla-rl reproduce: {record_path}: {error}", file=sys.stderr)
        return 2
    mismatches = checkout_mismatches(record, git_state())
    if mismatches and not args.allow_commit_mismatch:
        print("vla-rl reproduce: this checkout is not the code of the recorded run:\n  " + "\n  ".join(mismatches)
              + "\nCheck out the recorded commit (and apply its diff), or pass --allow-commit-mismatch to rerun "
              "with this code anyway.", file=sys.stderr)  # fmt: skip
        return 2
    for mismatch in mismatches:
        print(f"warning (--allow-commit-mismatch): {mismatch}")
    numerics = numerics_mismatch(record)
    if numerics:
        print(f"vla-rl reproduce: {numerics}", file=sys.stderr)
        return 2
    folder = Path(args.run_dir) if args.run_dir else default_folder(record)
    if folder.exists() and any(folder.iterdir()):
        print(f"vla-rl reproduce: {folder} exists and is not empty; name a new folder with --run-dir",
              file=sys.stderr)  # fmt: skip
        return 2
    argv = [*rerun_argv(record, folder), *pinned_iterations(record, original)]
    print(f"reproducing {record_path}: {command} into {folder}")
    code = main(argv)
    if code != 0:
        print(f"vla-rl reproduce: the rerun failed (exit status {code})", file=sys.stderr)
        return 2
    try:
        found = differences(original, folder, command)
    except RunFolderError as error:
        print(f"vla-rl reproduce: cannot compare: {error}", file=sys.stderr)
        return 2
    if found:
        print(f"differences between {original} and {folder}:\n  " + "\n  ".join(found))
        return 1
    print(f"identical: {original} and {folder} agree in {COMPARED[command]} (wall-clock values excluded)")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    reproduce = commands.add_parser(
        "reproduce",
        help="rerun a recorded run (run.json) into a new folder and compare: identical, or the differences",
        description="Rerun the command of a run record (RECORD_OR_FOLDER: a run.json or the folder holding it) "
        "with the same command line into a new folder, then compare the results with the recorded ones. Refuses "
        "when this checkout's commit or uncommitted diff differs from the record's. Exit status 0 only when "
        "identical, 1 when the results differ, 2 when it could not rerun.",
    )
    reproduce.add_argument("record", metavar="RECORD_OR_FOLDER", help="a run.json, or the run folder holding one")
    reproduce.add_argument("--run-dir", default=None, metavar="NEW",
                           help="the new run folder (default: the recorded folder + -reproduce-<time>)")  # fmt: skip
    reproduce.add_argument("--allow-commit-mismatch", action="store_true",
                           help="rerun even when this checkout's commit or diff differs from the record's")  # fmt: skip
    add_config_dir_argument(reproduce)
    reproduce.set_defaults(func=cmd_reproduce)
