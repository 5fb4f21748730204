"""The ``taylorformer`` command line: plugins, train, evaluate, plot."""
import argparse
import json
import sys

from taylorformer import registry


def _cmd_plugins(args):
    reg = registry.default()
    entries = [e for e in reg.entries(args.kind) if not args.kind or e.kind == args.kind]
    failures = reg.failures()
    if args.json:
        print(json.dumps({
            "components": [e.as_dict() for e in entries],
            "failures": [{k: v for k, v in f.as_dict().items() if k != "details"} for f in failures],
            "blocked": sorted(reg.blocked_plugins),
        }, indent=2))
        return 0
    rows = [("KIND", "NAME", "DISTRIBUTION", "VERSION", "DESCRIPTION")]
    for e in entries:
        name = e.name + (f" ({', '.join(e.aliases)})" if e.aliases else "")
        rows.append((e.kind, name, e.distribution, e.version, e.description))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    if reg.blocked_plugins:
        print(f"\nBlocked plugins: {', '.join(sorted(reg.blocked_plugins))}")
    if failures:
        print(f"\nFailed plugins ({len(failures)}):")
        for f in failures:
            print(f"  {f.plugin} [{f.distribution} {f.version}] {f.stage}: {f.error}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="taylorformer", description=__doc__)
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser("plugins", help="list registered components and failed plugins")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--kind", choices=sorted(registry.hookspecs.KINDS), help="only this kind")
    p.set_defaults(func=_cmd_plugins)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except registry.PluginLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
