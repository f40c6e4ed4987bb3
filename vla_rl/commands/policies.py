"""`vla-rl policies check`: the policy conformance kit (:mod:`policies.checks`) on a factory or a policy config."""

from __future__ import annotations

import argparse
import sys

from vla_rl.commands.common import CONFIG_DIR_HELP, add_config_arguments


def policy_under_test(target: str, overrides: list[str]) -> tuple[str, dict]:
    """``(factory, config)``: a factory import path with its default config ({}), or the composed ``policy=TARGET``."""
    from vla_rl.config import ConfigError
    from vla_rl.config.loading import load_config
    from vla_rl.stages.run_plan import read_policy_section

    if ":" in target:
        if overrides:
            raise ConfigError(f"overrides {overrides} apply to a policy config; give one (policy file) instead of the "
                              f"factory {target!r}")  # fmt: skip
        return target, {}
    cfg = load_config([f"policy={target}", *overrides])
    section = read_policy_section(cfg)
    return section.factory, section.config


def cmd_policies_check(args: argparse.Namespace) -> int:
    from policies.checks import CheckResult, PolicyConformanceError, run_checks, synthetic_io_spec

    factory, config = policy_under_test(args.target, list(args.overrides))
    from policies.factory import import_factory

    try:
        import_factory(factory)  # before any env renders (see docs/platform.md)
    except (ImportError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    io_spec = synthetic_io_spec(args.image_size)
    if args.env:
        from policies.config import PolicyIOSpec
        from vla_rl.stages.env_io import env_io_spec

        io_spec = PolicyIOSpec.from_spec(env_io_spec(args.env, None, {})).to_dict()

    def report(result: CheckResult) -> None:
        status = "ok  " if result.passed else "FAIL"
        print(f"  [{status}] {result.name}" + (f": {result.detail}" if result.detail else ""), flush=True)

    print(f"{factory} on {args.env or 'a synthetic env'} (cameras {list(io_spec['camera_names'])}, actions "
          f"{io_spec['action_low']}..{io_spec['action_high']})")  # fmt: skip
    try:
        run_checks(factory, config, io_spec, report=report)
    except PolicyConformanceError as error:
        print(f"conformance check failed for {factory}: {error}", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


def cmd_policies_list(args: argparse.Namespace) -> int:
    """The policy configs (``policy=NAME``) with the folder each comes from, and the installed policy plug-ins."""
    from contract.plugins import POLICY_GROUP, installed_plugins, plugin_config_dirs
    from vla_rl.config.loading import config_dir, extra_config_dirs

    plugged = {folder: plugin.source for folder, plugin in plugin_config_dirs()}
    print("policy configs (policy=NAME):")
    seen = set()
    for folder in [config_dir(), *extra_config_dirs()]:
        source = "vla-rl" if folder == config_dir() else plugged.get(folder, str(folder))
        for path in sorted((folder / "policy").glob("*.yaml")):
            if path.stem not in seen:
                seen.add(path.stem)
                print(f"  {path.stem} [{source}]")
    print("policy plug-ins (policy.factory=NAME):")
    for plugin in installed_plugins(POLICY_GROUP):
        print(f"  {plugin.name} = {plugin.value} [{plugin.source}]")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    policies = commands.add_parser(
        "policies", help="list the policy configs and plug-ins, or check a policy (a factory or a config) for conformance"
    )
    actions = policies.add_subparsers(dest="policies_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print the policy configs and installed policy plug-ins, with their source")
    listing.add_argument("--config-dir", action="append", default=[], metavar="DIR", help=CONFIG_DIR_HELP)
    listing.set_defaults(func=cmd_policies_list)
    check = actions.add_parser(
        "check",
        help="run the policy conformance kit",
        description="Build the policy and check act / evaluate / bc_loss shapes, the exact recomputation of act's "
        "log-probs by evaluate, actions in the env's units, and a save_pretrained / load_pretrained round trip. "
        "TARGET is a factory (my_pkg.my_policy:make, built with its default config) or a policy config "
        "(flow, or my_policy from --config-dir DIR/policy/my_policy.yaml) with optional overrides.",
    )
    check.add_argument("target", help="my_pkg.my_policy:make, or a policy config name such as flow")
    check.add_argument("--env", default=None, help="take the io spec from this env (default: a synthetic one)")
    check.add_argument("--image-size", type=int, default=32, help="image size of the synthetic env (default 32)")
    add_config_arguments(check, "policy overrides, e.g. policy.chunk_size=2")
    check.set_defaults(func=cmd_policies_check)
