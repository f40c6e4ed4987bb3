"""The contract between the core (``vla_rl``), the envs (``envs``) and the policies (``policies``).

All three depend on this package and it depends on none of them (``tests/core/test_dependency_rule.py``):

- :mod:`contract.config_reader`: the one reader of config sections into config dataclasses, with the type and
  range checks their ``__post_init__`` use;
- :mod:`contract.conformance`: the error and per-check result of the env and policy conformance kits;
- :mod:`contract.import_path`: the one resolver of ``"package.module:attribute"`` import paths (env, policy,
  expert and tracker factories);
- :mod:`contract.plugins`: the entry-point groups that installed plug-ins declare envs, policies and configs in;
- :mod:`contract.policy`: the policy protocol (:class:`~contract.policy.Policy`: ``act``, ``evaluate``, ``value``,
  ``bc_loss``, ``save_pretrained``) and the log-prob granularities the update reduces a head's log-probs to;
- :mod:`contract.vec_env`: :class:`~contract.vec_env.VecEnv`, the vectorised-env interface of the workers and the
  evaluation (``step_async``/``step_wait``, ``env_method``, ``get_attr``).
"""
