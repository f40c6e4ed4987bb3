"""Every `vla-rl` command the README and docs/ show runs, so a documented command cannot crash unnoticed.

The commands are read from the pages themselves: every line of a fenced code block that starts with
``vla-rl`` (continuation lines joined, comments cut), and every inline code span that starts with ``vla-rl``
(outside docs/results.md, a log of past runs whose code blocks are read). Each runs through ``vla_rl.cli.main``
in a scratch folder (the root of a clone: ``examples/`` is linked there), as :func:`plan` says:

- a synopsis line (``[overrides]``, ``A|B``, ``NAME``, ``<study>``, ``my_pkg...``): ``vla-rl COMMAND --help``;
- a server (``env-server``), a client of one (``--remote``) and ``reproduce`` of a recorded run (minutes):
  ``vla-rl COMMAND --help`` (tests/envs/test_remote_env.py and tests/core/test_run_record.py run them);
- a command that trains or needs a trained run (``train``, ``sft``, ``bench rollout|update|alignment``,
  ``eval`` of a policy path): its config is composed and validated by ``vla-rl config`` (``--train`` as
  `vla-rl train` composes it): a training run takes minutes;
- anything else runs for real, at a tiny size where it has one (``eval`` of the expert, ``collect``,
  ``bench env``, ``bench policy``) and as written otherwise (``envs``, ``policies check``, ``config``).

docs/new_env_guide.md's bash blocks are run verbatim, in order, by tests/examples/test_new_env_guide.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import time
from pathlib import Path

import pytest

import policies  # noqa: F401  (before any rendering in this process: see docs/platform.md)
from vla_rl.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RESULTS_LOG = REPO / "docs" / "results.md"
EXAMPLE_PACKAGES = [REPO / "examples" / name for name in ("planar_pusher", "rover_nav", "pooled_pixels_policy")]

FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`(vla-rl [^`]+)`")
#: A synopsis, not a command: optional parts, alternatives, upper-case placeholders, the docs' example names.
PLACEHOLDER = re.compile(r"(^|\s)\[|\||\.\.\.|\b[A-Z][A-Z_]{2,}\b|\bmy_pkg\b|\bmy_env\b|<[a-z_]+>")

#: Sizes that make a real run take seconds (appended after the documented overrides, so they win).
TINY_EVAL = ["eval.episodes_per_task=1", "eval.num_envs=1", "eval.video.episodes_per_task=1", "eval.video.grid_envs=0",
             "eval.trackers=[]", "eval.video.size=[32,32]"]  # fmt: skip
TINY_COLLECT = ["collect.episodes_per_task=1"]
TINY_BENCH = {"env": ["--steps", "20", "--repeats", "1"], "policy": ["--batch-size", "2", "--repeats", "1"],
              # one family: tests/policies/test_vlm_policy.py benches every family at this size and checks the figures
              "policy --vlm": ["--batch-size", "2", "--repeats", "1", "--vlm-hidden-size", "32", "--families", "expert"]}  # fmt: skip


def _lines(block: str) -> list[str]:
    return re.sub(r"\\\n\s*", " ", block).splitlines()


def _clean(line: str) -> str:
    line = line.strip().removeprefix("$ ").strip()
    line = re.sub(r"\s+#.*$", "", line)  # a trailing comment
    return " ".join(line.split())


def guide_commands() -> set[str]:
    """Commands of docs/new_env_guide.md's bash blocks (run there, verbatim)."""
    text = (REPO / "docs" / "new_env_guide.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    return {_clean(line) for block in blocks for line in _lines(block) if _clean(line).startswith("vla-rl ")}


def documented_commands() -> list[tuple[str, str]]:
    """(page, command) for every documented `vla-rl` command, in page order, without repeats."""
    found: dict[str, str] = {}
    for page in PAGES:
        text = page.read_text()
        for block in FENCED.findall(text):
            for line in _lines(block):
                command = _clean(line)
                if command.startswith("vla-rl "):
                    found.setdefault(command, page.name)
        if page != RESULTS_LOG:
            for span in INLINE.findall(FENCED.sub("", text).replace("\n", " ")):
                found.setdefault(_clean(span), page.name)
    return [(page, command) for command, page in found.items() if command not in guide_commands()]


def command_names() -> list[str]:
    from vla_rl.cli import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


def parses(words: list[str]) -> bool:
    """Whether the CLI's parser takes ``words`` (argparse exits on a missing argument)."""
    from vla_rl.cli import build_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_known_args(words)
    except SystemExit:
        return False
    return True


#: Documented commands that take far longer than a test may, run as ``--help`` here; why each is long.
LONG_RUNS = {
    "vla-rl envs check libero --all-tasks": "the conformance kit on all 130 LIBERO tasks, about 1.5 min each",
}


def plan(command: str) -> tuple[str, list[list[str]]]:
    """How the test runs ``command``: (what it checks, the argv lists for ``main``); see the module docstring."""
    words = shlex.split(command)[1:]
    sub = words[0]
    if command in LONG_RUNS:
        return "help", [[*[w for w in words if not w.startswith("--")][:2], "--help"]]
    if sub == "COMMAND":  # `vla-rl COMMAND --help`: every command's
        return "help", [[name, "--help"] for name in command_names()]
    if PLACEHOLDER.search(command):
        return "help", [[sub, "--help"]]
    if not parses(words):  # a mention in the text (`vla-rl envs check`), not a whole command: its --help
        return "help", [[*words, "--help"]]
    options = [w for w in words[1:] if w.startswith("--")]
    if sub in ("env-server", "reproduce") or "--remote" in options:  # a server, or a rerun of a recorded run
        return "help", [[sub, "--help"]]
    overrides = [w for w in words[1:] if "=" in w and not w.startswith("-")]
    config_dirs = [a for i, w in enumerate(words) if w == "--config-dir" for a in ("--config-dir", words[i + 1])]
    if sub == "train" or (sub == "bench" and words[1] in ("rollout", "update", "alignment")):
        return "composed", [["config", "--train", *config_dirs, *overrides]]
    if sub == "sft":
        return "composed", [["config", *config_dirs, *overrides]]
    if sub == "eval":
        policy = next((o.split("=", 1)[1] for o in overrides if o.startswith("eval.policy=")), "expert")
        if policy != "expert":
            return "composed", [["config", *config_dirs, *overrides]]
        return "ran", [[*words, *TINY_EVAL, "eval.output=eval_out"]]
    if sub == "collect":
        return "ran", [[*words, *TINY_COLLECT, "collect.output=collect_out"]]
    if sub == "bench":
        target = "policy --vlm" if words[1] == "policy" and "--vlm" in options else words[1]
        return "ran", [[*words, *TINY_BENCH[target]]]
    return "ran", [words]


def libero_missing() -> str | None:
    """Why LIBERO's commands cannot run here (``make libero`` not run), or None when they can."""
    try:
        import envs.libero  # noqa: F401
    except ImportError as error:
        return str(error)
    return None


COMMANDS = documented_commands()


def test_the_pages_document_the_commands_this_test_should_see():
    """The extraction finds the commands (a change of the pages' format must not empty this test)."""
    commands = [command for _, command in COMMANDS]
    for expected in ("vla-rl bench policy --vlm --batch-size 8 --repeats 2", "vla-rl eval eval.policy=expert env.tasks=[reach]",
                     "vla-rl policies check pooled_pixels_policy.policy:make"):  # fmt: skip
        assert expected in commands
    assert len(commands) >= 25


@pytest.fixture
def clone_root(tmp_path, monkeypatch):
    """A scratch folder standing for the root of a clone, the example packages importable (as installed)."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for package in EXAMPLE_PACKAGES:
        monkeypatch.syspath_prepend(str(package))
    monkeypatch.chdir(tmp_path)
    from policies.backbones.tiny import write_tiny_vlm

    write_tiny_vlm(tmp_path / "tiny_vlm", "idefics3")  # the guide's `python -m policies.backbones.tiny /tmp/tiny_vlm`
    return tmp_path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``vla-rl *argv``."""
    try:
        status = main(argv)
    except SystemExit as exit_:  # --help
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[command for _, command in COMMANDS])
def test_a_documented_command_runs(clone_root, capsys, page, command):
    kind, argv_list = plan(command.replace("/tmp/tiny_vlm", str(clone_root / "tiny_vlm")))
    if "libero" in command and kind != "help" and (missing := libero_missing()):
        pytest.skip(f"{missing} (`{command}` needs it)")
    for argv in argv_list:
        started = time.process_time()  # this process's CPU time: the same on a busy machine as on an idle one
        status, out, err = run(argv, capsys)
        shown = f"{page}: `{command}` ({kind}: vla-rl {shlex.join(argv)})"
        assert status == 0, f"{shown} exited {status}:\n{(out + err)[-3000:]}"
        cpu_s = time.process_time() - started
        assert cpu_s < 120, f"{shown} is no longer tiny: {cpu_s:.0f} CPU-seconds in the test's process"
        if kind == "help":
            assert out.startswith("usage: vla-rl"), shown
        elif kind == "composed":  # the composed, validated config printed as YAML
            assert "seed:" in out and "env:" in out, shown
        elif argv[0] == "eval":
            info = json.loads((clone_root / "eval_out" / "eval_info.json").read_text())
            assert info["overall"]["episodes"] == len(info["tasks"]) >= 1, shown
        elif argv[0] == "bench":
            assert isinstance(json.loads(out.strip().splitlines()[-1]), dict), shown  # one JSON object, last


def test_plot_of_a_run_folder_draws_its_curves(tmp_path, capsys):
    """`vla-rl plot RUN_DIR` (docs/evaluation.md, README) on a run folder's rl/metrics.jsonl."""
    rows = [{"step": step, "train/success_rate": 0.1 * step, "train/return_mean": float(step)} for step in (1, 2, 3)]
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    status, out, err = run(["plot", str(tmp_path)], capsys)
    assert status == 0, out + err
    assert (tmp_path / "rl" / "plots" / "success.png").is_file()
