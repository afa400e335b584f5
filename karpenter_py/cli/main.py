"""The ``karpenter-py`` command line: ``plan`` (and ``plan --disruption``), ``viewer``, ``crds`` and ``controller``.

Subcommand implementations are imported only when chosen, so ``karpenter-py plan`` never loads the
controller's asyncio/Kubernetes stack and ``karpenter-py --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import cast

EXIT_USAGE = 2


def _version() -> str:
    try:
        return metadata.version("karpenter-py")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


DISRUPTION_HELP = (
    "--disruption reads the same kinds a cluster dump gives (Nodes, Pods bound by "
    "spec.nodeName, NodeClaims, NodePools, PodDisruptionBudgets, DaemonSets, Namespaces, ...) "
    "and prints, with the controller's decision code, the commands disruption would take now "
    "(emptiness, drift, multi- and single-node consolidation, in order), their replacements and "
    "hourly savings, and why every other node is left alone; JSON: {commands: [{method, reason, "
    "candidates, replacements, savings}], unchanged: [{node, reason}], cost: {before, after}}. "
    "Workloads are not expanded (a dump lists their pods).\n\n"
    "A Node with a karpenter.sh/nodepool label and no NodeClaim is never disrupted, as in a "
    "cluster (give hand-written Nodes their NodeClaims). Offline, what the controllers would "
    "add is filled in: when no NodeClaim of the input carries one (a hand-written file), each "
    "NodeClaim without a Consolidatable condition gets one at --now from the NodePool's "
    "consolidateAfter and its lastPodEventTime or initialization, with a warning (otherwise "
    "its absence means not yet, as upstream); a Drifted condition is honoured, and a NodeClaim "
    "with a karpenter.sh/nodepool-hash annotation is also checked for NodePool drift; a "
    "PodDisruptionBudget without status.disruptionsAllowed gets it from minAvailable or "
    "maxUnavailable (percentages rounded up) over the matching pods in the input, bound pods "
    "counted healthy. Every NodeClass counts as Ready (but an EC2NodeClass of the input that "
    "selects no AMI, as a v1beta1 Ubuntu class without amiSelectorTerms) and every NodePool may "
    "use its whole catalog, chosen as plan chooses it (sized under its EC2NodeClass when the "
    "input has it)."
)


class _ParagraphFormatter(argparse.HelpFormatter):
    """Keeps the blank lines between epilog paragraphs (argparse joins them by default)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        return "\n\n".join(fill(part, width, indent) for part in text.split("\n\n"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="karpenter-py",
        description="Karpenter, the Kubernetes node autoscaler, in Python.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    plan = sub.add_parser(
        "plan",
        help="print the nodes Karpenter would launch for the pods in some manifests",
        description=(
            "Read Kubernetes YAML (NodePools, Pods, Deployments, StatefulSets, ReplicaSets, Jobs, "
            "DaemonSets, Nodes with their bound pods, NodeOverlays) and print what Karpenter "
            "would launch. "
            "No cluster and no cloud account are needed."
        ),
        epilog=(
            "Workloads expand to pods named <name>-<index> (a StatefulSet's <name>-<ordinal>). "
            "Kinds that do not affect placement (Service, ConfigMap, Secret, RBAC, "
            "PodDisruptionBudget, ...) are skipped; an unknown kind is an error. Exit status: "
            "0 when a plan was printed (unschedulable pods are listed in it), 2 on bad input.\n\n"
            + DISRUPTION_HELP
        ),
        formatter_class=_ParagraphFormatter,
    )
    plan.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE",
        help="YAML file with one or more documents; a directory; '-' for stdin (repeatable)",
    )
    plan.add_argument(
        "--instance-types",
        metavar="CATALOG.json",
        help="instance types in the KWOK provider's JSON format, for every NodePool (default: "
        "the built-in AWS catalog, sized under each NodePool's EC2NodeClass when the input has it)",
    )
    plan.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table for people (default) or json, a stable contract for scripts",
    )
    plan.add_argument(
        "--disruption",
        action="store_true",
        help="print what disruption would do now to the nodes in the input (see below)",
    )
    plan.add_argument(
        "--now",
        metavar="RFC3339",
        help="with --disruption: the time to decide at, e.g. 2026-01-01T12:00:00Z "
        "(default: the current UTC time)",
    )
    plan.add_argument(
        "--preference-policy",
        choices=("Respect", "Ignore"),
        default="Respect",
        help="as Karpenter's PREFERENCE_POLICY: honour or ignore preferred affinities (default Respect)",
    )
    plan.add_argument(
        "--feature-gates",
        metavar="GATES",
        help="as the controller's --feature-gates / FEATURE_GATES (this flag wins over the "
        "variable, else upstream's defaults), e.g. NodeOverlay=true: NodeOverlays in the input "
        "adjust prices and capacity; StaticCapacity=true: static NodePools are kept at their "
        "replicas",
    )
    plan.add_argument(
        "--min-values-policy",
        choices=("Strict", "BestEffort"),
        default="Strict",
        help="as Karpenter's MIN_VALUES_POLICY (default Strict)",
    )

    _add_viewer(sub)

    crds = sub.add_parser(
        "crds", help="write the CustomResourceDefinitions generated from the models"
    )
    crds.add_argument(
        "--out",
        default="manifests/crds",
        type=Path,
        help="output directory (default manifests/crds)",
    )

    ctl = sub.add_parser(
        "controller",
        help="run the Karpenter controller against a cluster",
        add_help=False,  # --help goes to the settings parser, which lists every setting
    )
    ctl.add_argument("settings", nargs=argparse.REMAINDER, help="settings flags (see --help)")
    return parser


def _add_viewer(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    viewer = sub.add_parser(
        "viewer",
        help="watch the cluster's nodes, their cost and what disruption would do, live",
        description=(
            "One row per node (NodePool, instance type, capacity type, zone, price, age, CPU, "
            "memory and pods used), its disruption state and the reason the disruption code "
            "gives, NodeClaims not registered yet, pending pods with the provisioner's reason, "
            "and totals per NodePool with the cost per hour and month and the next command's "
            "saving. Keys: c a u n sort by cost, age, utilisation, name; / filters by NodePool "
            "or label selector; Enter lists a node's pods; q quits."
        ),
    )
    viewer.add_argument("--once", action="store_true", help="print the view once and exit")
    viewer.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        default=[],
        metavar="FILE",
        help="a cluster dump (kubectl get nodes,pods,nodeclaims,nodepools,pdb,daemonsets,"
        "namespaces -A -o yaml), read as plan --disruption reads it (repeatable)",
    )
    viewer.add_argument("--kubeconfig", help="kubeconfig path (default: as the controller)")
    viewer.add_argument("--context", help="the kubeconfig context to use")
    viewer.add_argument(
        "--instance-types",
        metavar="CATALOG.json",
        help="instance types in the KWOK provider's JSON format, for prices (default: the "
        "built-in AWS catalog)",
    )
    viewer.add_argument(
        "--now", metavar="RFC3339", help="with -f: the time to decide at (default: now)"
    )
    viewer.add_argument(
        "--sort",
        choices=("cost", "age", "utilisation", "name"),
        default="name",
        help="row order within each NodePool (default name)",
    )
    viewer.add_argument(
        "--filter",
        default="",
        metavar="NODEPOOL|SELECTOR",
        help="show one NodePool's nodes, or those a label selector (a=b,c in (d)) matches",
    )


def _viewer(args: argparse.Namespace) -> int:
    from karpenter_py.cli.viewer.command import ViewerArgs, run_viewer
    from karpenter_py.manager.settings import SettingsError, load_feature_gates
    from karpenter_py.scheduling.inputs import SolveOptions

    try:
        gates = load_feature_gates(None, os.environ)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    viewer_args = ViewerArgs(
        files=cast("list[str]", args.files),
        once=bool(args.once),
        kubeconfig=cast("str | None", args.kubeconfig),
        context=cast("str | None", args.context),
        instance_types=cast("str | None", args.instance_types),
        now=cast("str | None", args.now),
        sort=args.sort,
        filter=cast(str, args.filter),
        node_overlay=gates.node_overlay,
        options=SolveOptions(),
    )
    return run_viewer(viewer_args, stdout=sys.stdout, stderr=sys.stderr)


def _plan(args: argparse.Namespace) -> int:
    from karpenter_py.scheduling.inputs import SolveOptions

    options = SolveOptions(
        preference_policy=args.preference_policy, min_values_policy=args.min_values_policy
    )
    if args.now is not None and not args.disruption:
        print("error: --now needs --disruption", file=sys.stderr)
        return EXIT_USAGE
    from karpenter_py.manager.settings import SettingsError, load_feature_gates

    try:
        gates = load_feature_gates(cast("str | None", args.feature_gates), os.environ)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.disruption:
        from karpenter_py.cli.disruption import run_disruption

        return run_disruption(
            cast("list[str]", args.files),
            instance_types=cast("str | None", args.instance_types),
            output=args.output,
            options=options,
            now=cast("str | None", args.now),
            node_overlay=gates.node_overlay,
            stdout=sys.stdout,
            stderr=sys.stderr,
        )
    from karpenter_py.cli.plan import run_plan

    return run_plan(
        cast("list[str]", args.files),
        instance_types=cast("str | None", args.instance_types),
        output=args.output,
        options=options,
        gates=gates,
        stdout=sys.stdout,
        stderr=sys.stderr,
    )


def _crds(args: argparse.Namespace) -> int:
    from karpenter_py.cli.crds import run_crds

    return run_crds(cast(Path, args.out))


def _controller(args: argparse.Namespace) -> int:
    try:
        manager = importlib.import_module("karpenter_py.manager")
    except ImportError as err:  # pragma: no cover - the package always exists
        print(f"error: the controller cannot be loaded ({err})", file=sys.stderr)
        return EXIT_USAGE
    run = getattr(manager, "run", None)
    if not callable(run):
        print(
            "error: the controller is not available in this build yet "
            "(karpenter_py.manager has no run())",
            file=sys.stderr,
        )
        return EXIT_USAGE
    result = run(list(args.settings))
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["controller"]:
        # Settings flags belong to the manager's parser (argparse's REMAINDER cannot pass
        # leading --flags through a subcommand).
        return _controller(argparse.Namespace(command="controller", settings=raw[1:]))
    args = build_parser().parse_args(raw)
    handlers = {"plan": _plan, "viewer": _viewer, "crds": _crds, "controller": _controller}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`karpenter-py plan ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
