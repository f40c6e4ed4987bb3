"""Speed benchmarks of the RL trainer's worker groups (``vla-rl bench rollout | update``).

Each benchmark builds the real worker groups from the composed config (the same code path as
``vla-rl train``), measures them, and returns a JSON-ready dict.
"""
