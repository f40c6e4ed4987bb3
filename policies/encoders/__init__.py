"""Observation encoders of the VLA policy: vision (timm + FiLM), language, proprioception."""

from policies.encoders.film import FiLM, FiLMLayers, install_film
from policies.encoders.language import LANGUAGE_ENCODERS, HashedBagOfWordsEncoder, build_language_encoder
from policies.encoders.language_base import LanguageEncoder
from policies.encoders.state import StateEncoder
from policies.encoders.vision import CameraBackbone, VisionEncoder, create_timm_backbone

__all__ = [
    "FiLM",
    "FiLMLayers",
    "install_film",
    "LANGUAGE_ENCODERS",
    "HashedBagOfWordsEncoder",
    "LanguageEncoder",
    "build_language_encoder",
    "StateEncoder",
    "CameraBackbone",
    "VisionEncoder",
    "create_timm_backbone",
]
