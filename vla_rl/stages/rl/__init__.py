"""RL (PPO/GRPO): the run assembled from the config (:mod:`.experiment`, the entry layer that names
envs and policies), the algo and trainer sections' schemas (:mod:`.config`), one rollout batch
(:mod:`.rollout`) and the fit loop (:mod:`.trainer`)."""
