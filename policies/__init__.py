"""VLA policies of vla-rl: encoders, action heads, normalisation, the composed policy, save/load."""

from policies.config import (
    HeadConfig,
    LanguageConfig,
    NormalizationConfig,
    PolicyConfig,
    PolicyIOSpec,
    StateConfig,
    ValueConfig,
    VisionConfig,
)
from policies.hub import load_pretrained, save_pretrained
from policies.normalization import MissingStatisticsError, Normalizer, compute_stats, load_stats
from policies.vla import VLAPolicy

__all__ = [
    "HeadConfig",
    "LanguageConfig",
    "NormalizationConfig",
    "PolicyConfig",
    "PolicyIOSpec",
    "StateConfig",
    "ValueConfig",
    "VisionConfig",
    "load_pretrained",
    "save_pretrained",
    "MissingStatisticsError",
    "Normalizer",
    "compute_stats",
    "load_stats",
    "VLAPolicy",
]
