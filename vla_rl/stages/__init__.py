"""The stages of an experiment, one room each, and the pipeline that runs them (``vla-rl train``).

- :mod:`vla_rl.stages.collect`: scripted-expert demonstrations (``demos.hdf5`` + ``stats.json``);
- :mod:`vla_rl.stages.sft`: behaviour cloning on them (the dataset, its batches, the loop);
- :mod:`vla_rl.stages.rl`: PPO/GRPO with the worker groups (the run's assembly, the fit loop, one rollout);
- :mod:`vla_rl.stages.evaluation`: evaluation episodes, success intervals, ``eval_info.json``, videos;
- :mod:`vla_rl.stages.pipeline`: ``experiment.stages`` in order, with resume.
"""
