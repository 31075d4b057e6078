"""Command line: python -m kubesim build|up|down|status."""

from __future__ import annotations

import argparse
import json
import sys
import time

from kubesim import build as kbuild
from kubesim.cluster import Cluster, ClusterError


def _cluster(args: argparse.Namespace) -> Cluster:
    return Cluster(
        args.name, state_dir=args.state_dir, nodes=getattr(args, "nodes", 1), time_scale=getattr(args, "time_scale", None)
    )


def cmd_build(args: argparse.Namespace) -> int:
    """Build the binaries (or find them in the cache) and print their folder."""
    t0 = time.monotonic()
    bin_dir = kbuild.build(force=args.force)
    print(f"kubesim: binaries in {bin_dir} ({time.monotonic() - t0:.1f}s)")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    """Start a named instance, or say that it already runs."""
    c = _cluster(args)
    if c.is_running():
        print(f"kubesim: instance {c.name!r} is already running")
    else:
        t0 = time.monotonic()
        if not kbuild.find_cached():
            kbuild.build()
        c.start(quiet=False)
        rss = c.memory_rss_kib() / 1024
        print(f"kubesim: instance {c.name!r} is up in {time.monotonic() - t0:.1f}s ({rss:.0f} MiB resident)")
    st = c.status()
    print(f"  apiserver:  https://127.0.0.1:{st['ports']['apiserver']}")
    print(f"  state dir:  {st['state_dir']}")
    print(f"  kubeconfig: {st['kubeconfig']}\n")
    print(f"  export KUBECONFIG={st['kubeconfig']}; kubectl get nodes")
    print("  kubectl -n kubesim-system edit configmap behaviours   # simulated container rules")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    """Stop a named instance's processes and remove its etcd data."""
    c = _cluster(args)
    if not c.processes():
        print(f"kubesim: instance {c.name!r} is not running")
        return 0
    c.stop(force=True)
    print(f"kubesim: instance {c.name!r} stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print what runs, on which ports, and the kubeconfig path; exit 3 when not running."""
    c = _cluster(args)
    st = c.status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0 if st["running"] else 3
    state = "not running"
    if st["running"]:
        state = "running" if st["start_seconds"] is not None else "starting"
    print(f"kubesim instance {c.name!r}: {state}")
    print(f"  state dir:  {st['state_dir']}")
    if st["processes"]:
        for name, info in st["processes"].items():
            print(f"  {name:24} pid {info['pid']:<8} {'alive' if info['alive'] else 'dead'}")
    if st["ports"]:
        print("  ports:      " + ", ".join(f"{k}={v}" for k, v in st["ports"].items()))
    if st["running"]:
        print(f"  kubeconfig: {st['kubeconfig']}")
        print(f"  memory:     {c.memory_rss_kib() / 1024:.0f} MiB resident")
    return 0 if st["running"] else 3


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one command."""
    p = argparse.ArgumentParser(
        prog="python -m kubesim",
        description="A real Kubernetes 1.20 control plane on loopback with simulated nodes (docs/local-cluster.md).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the control plane binaries into the cache")
    b.add_argument("--force", action="store_true", help="rebuild even if cached")
    b.set_defaults(func=cmd_build)
    for name, func, helptext in (
        ("up", cmd_up, "start an instance"),
        ("down", cmd_down, "stop an instance"),
        ("status", cmd_status, "show an instance"),
    ):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("--name", default="default", help="instance name (default: default)")
        sp.add_argument(
            "--state-dir", default=None, help="state folder (default: $KUBESIM_STATE/NAME or ~/.local/state/slipway/kubesim/NAME)"
        )
        sp.set_defaults(func=func)
        if name == "up":
            sp.add_argument("--nodes", type=int, default=1, help="simulated nodes (default 1)")
            sp.add_argument(
                "--time-scale",
                type=float,
                default=None,
                help="multiply every simulated duration (default $KUBESIM_TIME_SCALE or 1)",
            )
        if name == "status":
            sp.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except (kbuild.BuildError, ClusterError) as exc:
        print(f"kubesim: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
