"""Evaluation of the scripted expert and of an acting policy; eval_info.json and its schema; videos."""

from __future__ import annotations

import copy
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from envs.experts import get_expert
from envs.registry import make
from vla_rl.stages.evaluation import (
    EvalInfoError,
    EvalSettings,
    ExpertActionSource,
    PolicyActionSource,
    VideoConfig,
    evaluate_and_report,
    evaluation_seed,
    make_eval_envs,
    validate_eval_info,
    wilson_interval,
)

ENV_KWARGS = {"image_size": 64, "cameras": ("front", "wrist")}


def settings_without_videos(episodes_per_task: int, seed: int = 0) -> EvalSettings:
    """Seeded dev episodes, no videos."""
    return EvalSettings(episodes_per_task=episodes_per_task, seed=seed, protocol="seeded", split="dev",
                        video=VideoConfig(episodes_per_task=0, grid_envs=0))  # fmt: skip


def expert_episodes_by_hand(task: str, seeds: list[int]) -> list[tuple[bool, int]]:
    """(success, length) of the expert from each seed, stepping one env directly."""
    env = make(f"tabletop/{task}", **ENV_KWARGS)
    results = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed, options={"task": task})
        expert = get_expert("tabletop", task, env, noise_std=0.0, seed=0)
        for length in range(1, env.max_episode_steps + 1):  # noqa: B007 - read after the loop
            observation, _, terminated, truncated, info = env.step(expert.act(observation))
            if terminated or truncated:
                break
        results.append((bool(info["is_success"]), length))
    env.close()
    return results


@pytest.fixture(scope="module")
def expert_eval(tmp_path_factory):
    output = tmp_path_factory.mktemp("eval")
    envs = make_eval_envs("tabletop", ENV_KWARGS, ["reach"], num_envs=3)  # 5 episodes: rounds of 3 and 2
    settings = EvalSettings(episodes_per_task=5, seed=7, protocol="seeded", split="dev", video=VideoConfig(
        episodes_per_task=2, grid_envs=3, cameras=["front", "wrist"], size=[64, 96]))  # fmt: skip
    document, path = evaluate_and_report(
        envs, ExpertActionSource(), ["reach"], settings, output, {"kind": "expert"},
        {"id": "tabletop", "kwargs": {}, "num_envs": 3, "num_workers": 0},
    )  # fmt: skip
    envs.close()
    return document, path, output


def test_expert_gives_its_known_success_rate(expert_eval):
    document, _, _ = expert_eval
    seeds = [evaluation_seed(7, "reach", k) for k in range(5)]
    by_hand = expert_episodes_by_hand("reach", seeds)
    summary = document["tasks"]["reach"]
    assert document["seeds"]["reach"] == seeds
    assert [(e["success"], e["length"]) for e in summary["episode_results"]] == by_hand
    successes = sum(success for success, _ in by_hand)
    assert summary["successes"] == successes and summary["success_rate"] == successes / 5
    assert summary["success_ci95"] == pytest.approx(list(wilson_interval(successes, 5)))
    assert summary["mean_length"] == pytest.approx(np.mean([length for _, length in by_hand]))
    assert summary["mean_return"] == pytest.approx(successes / 5)  # sparse reward 1.0 on success
    assert document["overall"]["episodes"] == 5 and summary["wall_time_s"] > 0


def test_videos_have_one_frame_per_step_plus_reset(expert_eval):
    document, _, output = expert_eval
    summary = document["tasks"]["reach"]
    episodes = summary["episode_results"]
    assert summary["videos"]["episodes"] == ["videos/reach/episode_0000.mp4", "videos/reach/episode_0001.mp4"]
    assert [e["video"] is not None for e in episodes] == [True, True, False, False, False]
    for episode in episodes[:2]:
        frames = iio.imread(output / episode["video"])
        assert frames.shape == (episode["length"] + 1, 64, 192, 3)  # two cameras of (64, 96) side by side
        assert iio.immeta(output / episode["video"])["fps"] == pytest.approx(10.0)  # tabletop control_hz
    grid = iio.imread(output / summary["videos"]["grid"])
    longest = max(e["length"] for e in episodes[:3])
    assert grid.shape == (longest + 1, 128, 384, 3)  # 3 envs tiled 2 x 2


def rendered_expert_episode(task: str, seed: int, size: tuple[int, int]) -> np.ndarray:
    """``(length + 1, H, 2 W, 3)``: front and wrist cameras side by side at reset and after each expert step,
    rendered here by a MuJoCo renderer of our own (no shadows or reflections, as the video's renderer)."""
    import mujoco

    env = make(f"tabletop/{task}", **ENV_KWARGS)
    model, data = env.unwrapped.model, env.unwrapped.data
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, size[1])
    renderer = mujoco.Renderer(model, *size)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False

    def render() -> np.ndarray:
        images = []
        for camera in ("front", "wrist"):
            renderer.update_scene(data, camera=camera)
            images.append(renderer.render().copy())
        return np.concatenate(images, axis=1)

    observation, _ = env.reset(seed=seed, options={"task": task})
    expert = get_expert("tabletop", task, env, noise_std=0.0, seed=0)
    frames, done = [render()], False
    while not done:
        observation, _, terminated, truncated, _ = env.step(expert.act(observation))
        frames.append(render())
        done = terminated or truncated
    renderer.close()
    env.close()
    return np.stack(frames)


def test_video_frames_show_the_episode(expert_eval):
    """The decoded mp4s show the scene, step by step: not black, not frozen, and equal (within H.264's
    loss) to our own render of the same episode. Compared: the rows between the overlay's text strips,
    in every frame before the last (which carries the success marks); the grid's first tile likewise."""
    document, _, output = expert_eval
    episode = document["tasks"]["reach"]["episode_results"][0]
    frames = iio.imread(output / episode["video"]).astype(np.int16)
    expected = rendered_expert_episode("reach", episode["seed"], (64, 96)).astype(np.int16)
    assert frames.shape == expected.shape
    assert frames.mean() > 40  # not black
    assert np.abs(frames[-1] - frames[0]).mean() > 10  # the arm moves: not one frame repeated
    middle = slice(25, 50)  # below the instruction (up to two lines), above the status line
    errors = np.abs(frames[:-1, middle] - expected[:-1, middle]).mean(axis=(1, 2, 3))
    assert errors.max() < 8, f"mean absolute error per frame {errors.round(1)}"
    grid = iio.imread(output / document["tasks"]["reach"]["videos"]["grid"]).astype(np.int16)
    tile = grid[: len(frames) - 1, middle, :192]  # episode 0 is the grid's top-left tile
    tile_errors = np.abs(tile - expected[:-1, middle]).mean(axis=(1, 2, 3))
    assert tile_errors.max() < 8, f"grid tile: mean absolute error per frame {tile_errors.round(1)}"


def test_eval_info_validates_and_schema_catches_errors(expert_eval):
    document, path, _ = expert_eval
    import json

    assert json.loads(path.read_text()) == document
    validate_eval_info(document)
    broken = copy.deepcopy(document)
    broken["tasks"]["reach"]["success_rate"] = 1.5
    with pytest.raises(EvalInfoError, match="eval_info field 'tasks/reach/success_rate'"):
        validate_eval_info(broken)
    del broken["overall"]
    with pytest.raises(EvalInfoError, match="'overall' is a required property"):
        validate_eval_info(broken)


class StillPolicy:
    """A policy that never moves (chunks of 3 zero actions); returns torch tensors like the VLA policy."""

    def __init__(self):
        self.calls = 0

    def act(self, obs_batch, deterministic=True, generator=None):
        import torch

        self.calls += 1
        return torch.zeros(len(obs_batch["instruction"]), 3, 2), {}


def test_an_acting_policy_on_point_env_matches_a_replay(tmp_path):
    envs = make_eval_envs("point_env:make", {"max_episode_steps": 7}, ["reach_red", "reach_blue"], num_envs=4)
    policy = StillPolicy()
    settings = settings_without_videos(6, seed=3)
    document, _ = evaluate_and_report(
        envs, PolicyActionSource(policy), ["reach_red", "reach_blue"], settings, tmp_path, {"kind": "actor"},
        {"id": "point_env:make", "kwargs": {}, "num_envs": 4, "num_workers": 0},
    )  # fmt: skip
    envs.close()
    env = make("point_env:make/reach_red", max_episode_steps=7)
    for task in ("reach_red", "reach_blue"):
        expected = []
        for k in range(6):
            env.reset(seed=evaluation_seed(3, task, k), options={"task": task})
            success = bool(np.linalg.norm(env.position - env.goal) < 0.1)
            expected.append((success, 1 if success else 7))  # a still point ends at once or at truncation
        results = document["tasks"][task]["episode_results"]
        assert [(e["success"], e["length"]) for e in results] == expected
        assert all(e["video"] is None for e in results) and document["tasks"][task]["videos"]["grid"] is None
    assert policy.calls == 2 * (3 + 3)  # per task: rounds of 4 and 2 envs, 3 chunks of 3 steps cover 7 steps


def test_a_policy_with_wrong_action_shape_is_explained(tmp_path):
    class FlatActor:
        def act(self, obs_batch, deterministic=True, generator=None):
            return np.zeros((len(obs_batch["instruction"]), 2)), {}

    envs = make_eval_envs("point_env:make", {}, ["reach_red"], num_envs=2)
    settings = settings_without_videos(2)
    with pytest.raises(ValueError, match=r"actions of shape \(2, 2\); expected action chunks \(B=2, H, A\)"):
        evaluate_and_report(envs, PolicyActionSource(FlatActor()), ["reach_red"], settings, tmp_path,
                            {"kind": "actor"}, {})  # fmt: skip
    envs.close()


def test_expert_for_env_without_one_is_explained(tmp_path):
    envs = make_eval_envs("point_env:make", {}, ["reach_red"], num_envs=1)
    settings = settings_without_videos(1)
    with pytest.raises(KeyError, match="no scripted expert for env 'point_env:make', task 'reach_red': its factory "
                                       "'make' has no `expert` attribute. Experts exist for: tabletop/"):
        evaluate_and_report(envs, ExpertActionSource(), ["reach_red"], settings, tmp_path, {"kind": "expert"}, {})
    envs.close()


class NoisyPolicy:
    """Random chunks of 3 actions drawn from the generator the evaluation passes (as a flow head's noise)."""

    def __init__(self):
        self.chunks = []

    def act(self, obs_batch, deterministic=True, generator=None):
        import torch

        chunks = 0.3 * torch.randn(len(obs_batch["instruction"]), 3, 2, generator=generator)
        self.chunks.append(chunks)
        return chunks, {}


def test_a_sampling_policy_scores_the_same_whatever_the_global_random_state(tmp_path):
    import torch

    settings = settings_without_videos(6, seed=3)
    outcomes, actions = [], []
    for global_seed in (0, 1):
        torch.manual_seed(global_seed)  # e.g. an RL stage that drew from the global generator before
        envs = make_eval_envs("point_env:make", {"max_episode_steps": 7}, ["reach_red"], num_envs=4)
        policy = NoisyPolicy()
        document, _ = evaluate_and_report(
            envs, PolicyActionSource(policy), ["reach_red"], settings, tmp_path / str(global_seed),
            {"kind": "actor"}, {"id": "point_env:make", "kwargs": {}, "num_envs": 4, "num_workers": 0},
        )  # fmt: skip
        envs.close()
        outcomes.append([(e["return"], e["length"]) for e in document["tasks"]["reach_red"]["episode_results"]])
        actions.append(torch.cat(policy.chunks))
    assert outcomes[0] == outcomes[1]
    assert torch.equal(actions[0], actions[1])
    assert actions[0].std() > 0.2  # the chunks are noise, drawn from the evaluation's generator


def instruction_mask(frame: np.ndarray) -> np.ndarray:
    """Where the instruction's white text is: near-white pixels of the top strip (the scene under the strip is
    darkened, so only the text is that bright)."""
    return (frame[:13].astype(np.int16).min(axis=-1) > 170)


def test_every_video_frame_shows_its_own_episodes_instruction(tmp_path, monkeypatch):
    """One env runs every episode in turn (task reach_red, then reach_blue): the first frame of each episode, captured
    at its reset, and every later one carry that episode's instruction (the env's own text), in the records handed
    to the writer and in the decoded mp4, whose text strip is compared with the two instructions drawn alone."""
    from vla_rl.logging import video as video_module

    handed = []
    write_episode = video_module.VideoWriter.write_episode

    def recording_write(self, path, records, fps):
        handed.append((Path(path), [record["instruction"] for record in records]))
        return write_episode(self, path, records, fps)

    monkeypatch.setattr(video_module.VideoWriter, "write_episode", recording_write)
    tasks = ["reach_red", "reach_blue"]
    own = {task: f"move to the {task.split('_')[1]} square" for task in tasks}  # point_env's instructions
    envs = make_eval_envs("point_env:make", {"max_episode_steps": 4}, tasks, num_envs=1)
    settings = EvalSettings(episodes_per_task=2, seed=5, protocol="seeded", split="dev", video=VideoConfig(
        episodes_per_task=2, grid_envs=0, cameras=["top"], size=[96, 192]))  # fmt: skip
    document, _ = evaluate_and_report(
        envs, PolicyActionSource(StillPolicy()), tasks, settings, tmp_path, {"kind": "actor"},
        {"id": "point_env:make", "kwargs": {}, "num_envs": 1, "num_workers": 0},
    )  # fmt: skip
    envs.close()
    videos = {tmp_path / e["video"]: (task, e) for task in tasks for e in document["tasks"][task]["episode_results"]}
    assert len(videos) == 4 and sorted(path for path, _ in handed) == sorted(videos)
    for path, instructions in handed:
        task, episode = videos[path]
        assert instructions == [own[task]] * (episode["length"] + 1), path.name

    gray = np.full((96, 192, 3), 200, np.uint8)
    drawn = {task: instruction_mask(video_module.draw_overlay(
        {"frame": gray, "step": 0, "reward": 0.0, "return": 0.0, "success": False, "instruction": own[task]}))
        for task in tasks}  # fmt: skip
    assert (drawn["reach_red"] != drawn["reach_blue"]).sum() > 50  # the two texts look different
    for path, (task, episode) in videos.items():
        other = tasks[1 - tasks.index(task)]
        frames = iio.imread(path)
        assert len(frames) == episode["length"] + 1
        for index, frame in enumerate(frames):
            mask = instruction_mask(frame)
            mine, theirs = (mask != drawn[task]).sum(), (mask != drawn[other]).sum()
            assert mine < theirs / 3, f"{path.name} frame {index}: text differs from its own instruction in {mine} px"
