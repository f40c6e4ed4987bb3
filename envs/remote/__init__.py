"""Remote envs: a simulator in another process or machine, behind an env server (docs/remote_envs.md)."""
