"""vla-rl: train vision-language-action robot policies with reinforcement learning in simulation."""

__version__ = "0.1.0"
