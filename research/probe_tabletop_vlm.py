"""Did the pretrained tabletop VLM learn anything? Held-out captions and a linear probe, against the same
model untrained.

For the model folder written by ``scripts/pretrain_tabletop_vlm.py`` and for its random initialisation (the
same architecture, vocabulary and seed, rebuilt from ``pretraining.json``), this prints as JSON:

- ``caption_accuracy``: on ``--held-out`` frames of the held-out split (reset seeds never trained on), the
  teacher-forced accuracy of each caption slot (object x / y, drawer, gripper x / y / z) beside uniform chance
  and the majority word (:func:`policies.backbones.pretrain.caption_accuracy`);
- ``probe``: the backbone loaded as the policy loads it (``HFVLMEncoder``: ``AutoModel.from_pretrained``, the
  policy's image and token layout, no caption), its hidden states pooled over the tokens (``mean``, the policy's
  default, and ``last``), and a ridge regression (``RidgeCV`` on standardised features) fitted on ``--frames``
  frames of the probe split to the instruction's block x-y (block tasks) and the grip site x-y-z, scored on the
  held-out frames: R^2 and the mean error in cm, beside predicting the mean.

    .venv/bin/python research/probe_tabletop_vlm.py assets/tabletop_vlm --frames 2000 --held-out 1000
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import RidgeCV
from sklearn.preprocessing import StandardScaler

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.builtin.captions import CaptionedFrames, captioned_frames, vocabulary_words
from policies.backbones.config import VLMBackboneConfig
from policies.backbones.hf_vlm import HFVLMEncoder
from policies.backbones.pretrain import PretrainConfig, build_captioner, caption_accuracy, save_captioner
from policies.config import StateConfig


def load_captioner(folder: Path):
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    model = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(folder, local_files_only=True)


@torch.no_grad()
def pooled_features(folder: Path, frames: CaptionedFrames, cameras: list[str], pooling: str, batch: int = 128):
    """``(N, E)``: the policy encoder's pooled hidden states of every frame."""
    config = VLMBackboneConfig(source=str(folder), train="frozen", pooling=pooling)
    encoder = HFVLMEncoder(config, cameras, 0, StateConfig(enabled=False), embedding_dim=8).eval()
    rows = []
    for begin in range(0, len(frames), batch):
        end = min(begin + batch, len(frames))
        images = {camera: torch.from_numpy(frames.images[camera][begin:end]) for camera in cameras}
        rows.append(encoder.hidden_states(images, frames.instructions[begin:end]).numpy())
    return np.concatenate(rows)


def ridge_scores(fit_x, fit_y, test_x, test_y) -> dict[str, float]:
    """R^2 and mean Euclidean error (cm) of a ridge fit, and the error of predicting the fit targets' mean."""
    scaler = StandardScaler().fit(fit_x)
    ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(scaler.transform(fit_x), fit_y)
    predicted = ridge.predict(scaler.transform(test_x))
    residual = ((test_y - predicted) ** 2).sum()
    total = ((test_y - test_y.mean(0)) ** 2).sum()
    return {"r2": round(float(1 - residual / total), 4),
            "error_cm": round(float(np.linalg.norm(test_y - predicted, axis=1).mean() * 100), 2),
            "mean_prediction_error_cm": round(float(np.linalg.norm(test_y - fit_y.mean(0), axis=1).mean() * 100), 2),
            "alpha": float(ridge.alpha_)}  # fmt: skip


def probe(folder: Path, fit: CaptionedFrames, test: CaptionedFrames, cameras: list[str]) -> dict:
    result = {}
    fit_blocks, test_blocks = ~np.isnan(fit.object_xy[:, 0]), ~np.isnan(test.object_xy[:, 0])
    for pooling in ("mean", "last"):
        fit_x, test_x = (pooled_features(folder, frames, cameras, pooling) for frames in (fit, test))
        result[pooling] = {
            "object_xy": ridge_scores(fit_x[fit_blocks], fit.object_xy[fit_blocks], test_x[test_blocks],
                                      test.object_xy[test_blocks]),
            "gripper_xyz": ridge_scores(fit_x, fit.gripper_xyz, test_x, test.gripper_xyz),
        }  # fmt: skip
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder written by scripts/pretrain_tabletop_vlm.py")
    parser.add_argument("--frames", type=int, default=2000, help="probe-split frames the ridge is fitted on")
    parser.add_argument("--held-out", type=int, default=1000, help="held-out-split frames it is scored on")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    record_path = folder / "pretraining.json"
    if not record_path.is_file():
        parser.error(f"{record_path} is missing: give a folder written by scripts/pretrain_tabletop_vlm.py")
    torch.set_num_threads(args.threads)
    record = json.loads(record_path.read_text())
    config = PretrainConfig(**{**record["config"], "steps": 0})
    cameras, seed, size = list(config.cameras), record["data"]["seed"], record["data"]["image_size"]
    fit = captioned_frames(args.frames, seed, "probe", image_size=size, cameras=cameras)
    test = captioned_frames(args.held_out, seed, "held_out", image_size=size, cameras=cameras)
    result = {"folder": str(folder), "fit_frames": args.frames, "held_out_frames": args.held_out,
              "caption_accuracy": {}, "probe": {}}  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        random_folder = save_captioner(Path(scratch) / "random", *build_captioner(config, vocabulary_words()))
        for name, path in (("pretrained", folder), ("random_init", random_folder)):
            model, tokenizer = load_captioner(path)
            result["caption_accuracy"][name] = caption_accuracy(model, tokenizer, test, fit, cameras)
            result["probe"][name] = probe(path, fit, test, cameras)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
