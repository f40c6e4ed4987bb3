"""Tiny random vision-language models, written as real Hugging Face folders (for tests, benchmarks, the guide).

``write_tiny_vlm(folder, "idefics3" | "smolvlm" | "paligemma")`` builds the architecture from a config with a
few-thousand-parameter towers and random weights, a word-level tokenizer over the tabletop's instruction words
(``tokenizers``), and ``save_pretrained``s them, so the policy loads them through the same
``from_pretrained`` path as a downloaded SmolVLM or PaliGemma. They are not trained: nothing here is a
pretrained model. ``python -m policies.backbones.tiny DIR --architecture paligemma`` writes one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch

SPECIALS = ["<pad>", "<unk>", "<bos>", "<eos>", "<image>"]
WORDS = (
    "pick up lift grasp the a red green blue yellow block cube ball object reach to touch move put place on in into "
    "open close drawer push left right front back of and target goal pad go drive"
).split()
IMAGE_TOKEN_ID = SPECIALS.index("<image>")


def vocabulary(extra_words: Sequence[str] = ()) -> list[str]:
    """The tokens in id order: the specials, ``WORDS``, then the ``extra_words`` not already there (so the ids of
    the base vocabulary never change when words are added)."""
    tokens = [*SPECIALS, *WORDS]
    for word in extra_words:
        if word.lower() != word or not word.isalpha():
            raise ValueError(f"extra word {word!r}: give lower-case letters only (the tokenizer lower-cases)")
        if word not in tokens:
            tokens.append(word)
    return tokens


def make_tokenizer(extra_words: Sequence[str] = ()):
    """A word-level fast tokenizer (lower-cased, split on whitespace and punctuation) over :func:`vocabulary`."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(vocabulary(extra_words))}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )


def write_tokenizer(folder: Path, extra_words: Sequence[str] = ()) -> None:
    """:func:`make_tokenizer` saved into ``folder``."""
    make_tokenizer(extra_words).save_pretrained(folder)


def tiny_config(
    architecture: str, image_size: int, hidden_size: int, num_layers: int, patch_size: int | None = None,
    vocab_size: int | None = None,
):  # fmt: skip
    """The transformers config of a tiny ``architecture`` model (patches of ``image_size // 4`` by default; the
    base vocabulary's size by default)."""
    from transformers import Idefics3Config, PaliGemmaConfig, SmolVLMConfig

    vocab_size = vocab_size or len(SPECIALS) + len(WORDS)
    patch_size = patch_size or image_size // 4
    if image_size % patch_size:
        raise ValueError(f"image_size={image_size} is not a multiple of patch_size={patch_size}")
    vision = {"hidden_size": hidden_size, "intermediate_size": 2 * hidden_size, "num_hidden_layers": num_layers,
              "num_attention_heads": 2, "image_size": image_size, "patch_size": patch_size}  # fmt: skip
    text = {"vocab_size": vocab_size, "hidden_size": hidden_size, "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": num_layers, "num_attention_heads": 2, "num_key_value_heads": 1, "pad_token_id": 0,
            "head_dim": hidden_size // 2}  # fmt: skip
    if architecture in ("idefics3", "smolvlm"):
        config_class = Idefics3Config if architecture == "idefics3" else SmolVLMConfig
        return config_class(vision_config=vision, text_config={"model_type": "llama", **text},
                            image_token_id=IMAGE_TOKEN_ID, scale_factor=2)  # fmt: skip
    if architecture == "paligemma":
        return PaliGemmaConfig(
            vision_config={"model_type": "siglip_vision_model", "projection_dim": hidden_size, **vision},
            text_config={"model_type": "gemma", **text}, image_token_index=IMAGE_TOKEN_ID, projection_dim=hidden_size,
        )  # fmt: skip
    raise ValueError(f"architecture {architecture!r}; allowed: idefics3, smolvlm, paligemma")


def write_tiny_vlm(
    folder: str | Path, architecture: str = "idefics3", image_size: int = 32, hidden_size: int = 32,
    num_layers: int = 2, seed: int = 0,
) -> Path:  # fmt: skip
    """Write a tiny random ``...ForConditionalGeneration`` model, its tokenizer and image statistics; returns the folder."""
    from transformers import AutoModelForImageTextToText

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(tiny_config(architecture, image_size, hidden_size, num_layers))
    model.save_pretrained(folder)
    write_tokenizer(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps({"image_mean": [0.5] * 3, "image_std": [0.5] * 3}))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--architecture", default="idefics3", choices=["idefics3", "smolvlm", "paligemma"])
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=32)
    parser.add_argument("--num-layers", type=int, default=2)
    args = parser.parse_args()
    print(write_tiny_vlm(args.folder, args.architecture, args.image_size, args.hidden_size, args.num_layers))


if __name__ == "__main__":
    main()
