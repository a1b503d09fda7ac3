"""The `kubectl-tessera` executable: `kubectl tessera nodes | explain POD|TYPE/NAME|pg/NAME | what-if [--config FILE] |
rollback-check`.

One shape for every command: resolve the cluster as kubectl does (`target.py`), list it once
(`scheduler.kube.snapshot`), compute, print a table or `-o json|yaml`. Errors are one line on
stderr in kubectl's words (`error: ...`, exit 1; bad arguments or configuration exit 2; a context the
kubeconfig does not define: `Error in configuration: ...`, as kubectl get prints it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio

from scheduler.api.config import BUILTIN_SOURCE, ConfigError, SchedulerConfig, load_config
from scheduler.build_info import add_version_option
from scheduler.closed_pipe import reader_gone
from scheduler.first_few import first_few
from scheduler.kube.http import (TRANSPORT_ERRORS, ConnectError, ContextNotFound, Impersonation, KubeconfigError,
                                 KubeHttp, Response, check_apiserver, connect, rejected)
from scheduler.kube.informers import NODES, PODS, PRIORITY_CLASSES, SCHEDULER_KINDS, ResourceKind
from scheduler.kube.snapshot import ClusterListing, ListError, list_cluster, list_kind, namespaced_path, object_events
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import explain_group as explaining_group
from scheduler.kubectl import capacity, limitrange, probe_pods, quota, rollback, whatif
from scheduler.kubectl.installed import DEFAULT_NAMESPACE, ChosenConfig, installed_config
from scheduler.kubectl.leadership import UNKNOWN, Leadership, config_drift, leadership
from scheduler.kubectl.other_profile import pending_left_out
from scheduler.kubectl.output import FORMATS, dump
from scheduler.kubectl.reference import (JOB, PODGROUP_TYPES, BadReference, Reference, chosen_note, missing_note,
                                         not_found, not_found_hint, podgroup_resource, read_as_namespace, reference,
                                         workload_pods)
from scheduler.kubectl.target import Target, resolve, user_name
from scheduler.kubectl.unread import nodes_view, podgroup_kind
from scheduler.logs import describe_error
from scheduler.sim.cli import add_seed_option
from scheduler.view.model import as_dict
from scheduler.view.text import escape_terminal, render_nodes

USER_AGENT = "kubectl-tessera"
NODES_LEGEND = """GPU states (the first that applies; REASON says more):
  conflict    claimed by more than one pod, whole by several, whole and in slices at once, or in slices
              beyond its capacity (bound outside one scheduler's ledger): REASON names them all
  ghost       its ExtendedResource is gone, a pod's annotation still names it (counted until the pod ends)
  unhealthy   the node agent reports it unhealthy
  cordoned    the device's spec.unschedulable, or one GPU under two names
  fenced      free, but given to no pod: a bound pod's tessera.dev/devices annotation on its node is
              unreadable or missing (what it holds beyond its own GPUs is unknown; REASON names it), or no Node object
  gated       assigned to a pod whose Binding the allocation gate holds (live page only)
  whole       given whole to one pod
  slices      shared: USE is the sharing dimension in use of its capacity (4Gi/16Gi); above it
              (15Gi/14Gi) when its capacity went down under slices already held (REASON says so)
  counted     in use by a plain count request (nvidia.com/gpu: N): the device plugin picks which GPU,
              so the count is drawn on free GPUs of that resource, not on the GPU the pod has
  free        nothing holds it
Holders: allocating (the agent has not handed its devices out yet), terminating (being deleted:
its GPUs are free once it is gone), nominated (room a pending preemptor's preemption made).
REASON "node agent silent 5m": the node's agent heartbeated, but not within agentHeartbeatTimeoutSeconds:
the health shown is what it last published (the node's note says more)."""


class CommandError(Exception):
    """What went wrong, in one line, and the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def _common(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """kubectl's connection flags; on the subcommands too, so they may come before or after it."""
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument("--kubeconfig", default=default, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=default, help="the kubeconfig context to use")
    parser.add_argument("-n", "--namespace", default=default, help="namespace (default: the context's, else default)")
    parser.add_argument("--as", dest="as_user", metavar="USER", default=default,
                        help="act as this user (or system:serviceaccount:NS:NAME), as kubectl --as does")
    # the subcommand's own list: argparse sets a subcommand's values over the main parser's, so one
    # list for both kept only the groups after the command (kubectl keeps every one, in order)
    parser.add_argument("--as-group", dest="as_groups_after" if suppress else "as_groups", metavar="GROUP",
                        action="append", default=default if suppress else [],
                        help="act as a member of this group (repeat for several; needs --as)")
    parser.add_argument("--as-uid", dest="as_uid", metavar="UID", default=default, help="act as this UID (needs --as)")


WIDE = "each GPU's NUMA node and NVLink group"  # what `nodes -o wide` adds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl tessera",
                                     description="Look at Tessera's GPUs, pending pods and decisions (read-only).")
    add_version_option(parser, "kubectl-tessera")
    _common(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_: str, epilog: str | None = None, wide: bool = False) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_, description=help_, epilog=epilog,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        _common(cmd, suppress=True)
        formats = ("table", "wide", *FORMATS[1:]) if wide else FORMATS
        cmd.add_argument("-o", "--output", type=_output(formats), metavar="{" + ",".join(formats) + "}",
                         default="table",
                         help=f"table (default), {'wide (also ' + WIDE + '), ' if wide else ''}json or yaml")
        return cmd

    nodes = command("nodes", "every node's GPUs as the scheduler sees them: state, use, holders; a summary line",
                    NODES_LEGEND, wide=True)
    nodes.add_argument("--config", help="the scheduler's configuration (default: the installed one, else the "
                                        "built-in one); decides which pending pods are Tessera's")
    _installed(nodes)
    nodes.set_defaults(func=_nodes)
    exp = command("explain", "why a pod is pending, or where it went and with which devices; or why a PodGroup's "
                             "gang waits")
    exp.add_argument("pod", help="the pod's name (in -n NAMESPACE), pod/NAME, or NAMESPACE/NAME; or TYPE/NAME of "
                                 "a job, deployment (deploy), replicaset (rs) or statefulset (sts): its first "
                                 "pending pod, the others named on stderr; or of a PodGroup (pg, podgroup; "
                                 "podgroups.scheduling.x-k8s.io or podgroups.scheduling.k8s.io for one API): its "
                                 "gang, members and why it waits")
    exp.add_argument("--config", help="the configuration to dry-run the pod with (default: the installed one, "
                                      "else the built-in one)")
    _installed(exp)
    exp.set_defaults(func=_explain)
    what = command("what-if", "replay the cluster's pending pods as they are now, or under another configuration "
                              "(a dry run)")
    what.add_argument("--config", help="the configuration to try (default: the installed one, else the built-in one)")
    what.add_argument("-A", "--all-namespaces", action="store_true",
                      help="show pending pods of every namespace (the default unless -n is given)")
    what.add_argument("-f", "--filename", metavar="FILE", action="append",
                      help="place these pods instead (Pods, Deployments, ReplicaSets, StatefulSets, Jobs, Kubeflow "
                           "training jobs, Lists, PodGroups; PersistentVolumeClaims, PersistentVolumes and StorageClasses "
                           "join the dry run; Nodes and tessera.dev ExtendedResources are capacity added for it: a "
                           "file of Nodes alone places the pending pods with them; objects of other built-in kinds "
                           "that make no pods, such as Services and ConfigMaps, are skipped with a note, and any other "
                           "kind (a DaemonSet, a CronJob, a custom resource) is an error; "
                           "PriorityClasses are not taken: apply them first (kubectl apply -f ...), then give "
                           "what-if the rest; - for stdin; repeat -f for several files), not created: "
                           "where they would go if created now, behind the pods already pending")
    what.add_argument("--rename", action="store_true",
                      help=f"with -f: place copies of the file's objects, each named NAME{probe_pods.RENAME_SUFFIX}, "
                           "their pods in the copies of the file's PodGroups (and label gangs of their own): what "
                           "re-submitting objects that exist already would do")
    what.add_argument("--without-node", metavar="NAME", action="append",
                      help="replay without this node (not deleted; repeat for several): its pods are replayed as "
                           "pending and listed, each with the node it was on (a DaemonSet's go with it)")
    what.add_argument("--without-nodes", metavar="SELECTOR",
                      help="replay without the nodes this label selector matches (as kubectl get nodes -l takes it: "
                           "a rack's label), as --without-node does")
    add_seed_option(what)
    _installed(what)  # its Lease says who schedules the pending pods now (the Leader: line)
    what.set_defaults(func=_what_if)
    back = command("rollback-check", "before rolling back to a build without tessera.dev/held-devices (before "
                                     f"{rollback.HELD_DEVICES_SINCE}): the pods whose GPUs it would take for free "
                                     "(exit 1 when there are any); it reads every namespace, -n does not narrow it")
    back.set_defaults(func=_rollback_check)
    return parser



def _output(formats: tuple[str, ...]) -> Callable[[str], str]:
    """-o's check: one of `formats`, else kubectl's words for a format a command has no printer for
    (cli-runtime's PrintFlags), naming those it takes (a user's `what-if -o wide`, as `nodes -o
    wide`, read argparse's "invalid choice"), and for wide which command has it."""
    def check(value: str) -> str:
        if value in formats:
            return value
        nodes = f" (-o wide is kubectl tessera nodes': {WIDE})" if value == "wide" else ""
        raise argparse.ArgumentTypeError(f"unable to match a printer suitable for the output format \"{value}\", "
                                         f"allowed formats are: {','.join(formats)}{nodes}")
    return check


def _installed(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--scheduler-namespace", default=DEFAULT_NAMESPACE, metavar="NS",
                     help="where the installed scheduler's ConfigMap tessera-scheduler-config is, read when "
                          f"--config is not given (default: {DEFAULT_NAMESPACE})")


def impersonation(args: argparse.Namespace) -> Impersonation | None:
    """Whom --as, --as-group and --as-uid act as (None: the kubeconfig's own identity; an empty
    --as is none, as kubectl reads it)."""
    if not args.as_user:
        return None
    return Impersonation(args.as_user, _groups(args), args.as_uid or "")


def _groups(args: argparse.Namespace) -> tuple[str, ...]:
    """Every --as-group, those before the subcommand first."""
    return (*(args.as_groups or ()), *getattr(args, "as_groups_after", ()))


def _config(path: str | None) -> SchedulerConfig:
    try:
        return load_config(path)
    except ConfigError as err:
        raise CommandError(f"invalid configuration: {err}", 2) from None


async def _chosen(args: argparse.Namespace, http: KubeHttp) -> ChosenConfig:
    """--config FILE when given (read before the cluster is), else the installed configuration."""
    if args.config is not None:
        return ChosenConfig(_config(args.config))
    return await _installed_config(args, http)


async def _installed_config(args: argparse.Namespace, http: KubeHttp) -> ChosenConfig:
    """The installed configuration (--scheduler-namespace), saying on stderr why not when it is not used."""
    chosen = await installed_config(http, args.scheduler_namespace)
    if chosen.warning is not None:
        print(f"warning: {chosen.warning}", file=sys.stderr)
    return chosen


def _lease_source(args: argparse.Namespace, chosen: ChosenConfig) -> str:
    """Whose Lease the Leader line read: the configuration --config names, the installed one (its
    ConfigMap, also when only its leaderElection could be read), or the built-in one."""
    if args.config is not None:
        return f"--config {args.config}'s"
    if chosen.election is not None or chosen.config.source != BUILTIN_SOURCE:
        return "the installed configuration's"
    return "the built-in configuration's"


async def _leader(http: KubeHttp, chosen: ChosenConfig, args: argparse.Namespace) -> Leadership | None:
    """explain's and what-if's `Leader:` line: who schedules now, by the Lease of the `chosen`
    configuration, the one they dry-run (--config FILE's: a re-trial ran Tessera by hand on a file
    beside the installed chart, and what-if read the chart's released Lease while explain named the
    leader); unknown, saying why, when that Lease is not known. The wait a watch of it takes
    is said on stderr. A 403 names the shipped Role when the Lease is in --scheduler-namespace.
    When the dry run uses the installed configuration (no --config, and it was read), a leader
    running another one is said beside it (`config_drift`)."""
    election = chosen.lease
    if isinstance(election, str):
        return Leadership("", UNKNOWN, f"unknown: {election}")
    leader = await leadership(http, election, role_namespace=args.scheduler_namespace,
                              progress=lambda line: print(line, file=sys.stderr))
    if leader is None or args.config is not None or chosen.warning is not None:
        return leader
    return replace(leader, drift=config_drift(leader, chosen.config, args.scheduler_namespace))


async def _listing(target: Target, namespaces: Iterable[str],
                   kinds: tuple[ResourceKind, ...] = SCHEDULER_KINDS) -> tuple[KubeHttp, ClusterListing]:
    """Connect and list the cluster's `kinds` (a namespaced kind denied cluster-wide in `namespaces`,
    the ones the command is about); the client is returned for follow-up reads (closed by the caller)."""
    api = await connect(target.kubeconfig, user_agent=USER_AGENT, context=target.context,
                        impersonate=target.impersonate)
    http = KubeHttp(api)
    try:
        response = await check_apiserver(http, target.kubeconfig)
        if response.status in (401, 403):
            raise CommandError(rejected(http, response))
        return http, await list_cluster(http, kinds, namespaces=namespaces)
    except ListError as err:
        await api.close()
        raise CommandError(str(err)) from None
    except BaseException:
        await api.close()
        raise


def _warn(listing: ClusterListing) -> None:
    for warning in listing.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _print(doc: dict[str, Any], text: Callable[[], str], fmt: str) -> None:
    """The document as JSON/YAML, or its text for a terminal, escaped as kubectl's describe writes
    (its free-text lines too: a pod condition's message, a gang's reason)."""
    sys.stdout.write(escape_terminal(text()) + "\n" if fmt in ("table", "wide") else dump(doc, fmt))


async def _nodes(args: argparse.Namespace, target: Target) -> int:
    if args.config is not None:
        _config(args.config)  # a bad file fails before the cluster is read
    http, listing = await _listing(target, [target.namespace])
    try:
        chosen = await _chosen(args, http)
    finally:
        await http.api.close()
    _warn(listing)
    left_out = pending_left_out(listing.objects, chosen.config.scheduler_names, chosen.config.source,
                                args.scheduler_namespace)
    if left_out:
        print(f"warning: {left_out}", file=sys.stderr)
    view = nodes_view(chosen.config, listing.objects, time.time(), listing.unread)
    _print(as_dict(view), lambda: render_nodes(view, wide=args.output == "wide"), args.output)
    return 0


async def _workload_pod(http: KubeHttp, ref: Reference, objects: list[dict[str, Any]]) -> str:
    """The pod of the workload `ref` names to explain (`reference.workload_pods`), said on stderr
    with the others that wait."""
    assert ref.kind is not None
    try:
        response = await http.request("GET", ref.kind.path(ref.namespace, ref.name), limited=False)
    except TRANSPORT_ERRORS as err:
        raise CommandError(f"cannot read {ref.kind.word}/{ref.name}: {describe_error(err)}") from None
    if response.status == 404:
        raise CommandError(not_found(ref))
    if response.status in (401, 403):
        raise CommandError(rejected(http, response))
    if not response.ok:
        raise CommandError(f"cannot read {ref.kind.word}/{ref.name}: HTTP {response.status}: {response.message()}")
    workload = response.json()
    # a Job's own Events say why its controller made too few pods (read-only; unreadable: none)
    events = (await object_events(http, ref.namespace, ref.name, str((workload.get("metadata") or {}).get("uid") or ""),
                                  kind="Job") if ref.kind is JOB else [])
    known = events if isinstance(events, list) else []
    try:
        pods = workload_pods(ref, workload, objects, known)
        print(chosen_note(ref, pods, missing_note(ref, workload, objects, known, "the rest")), file=sys.stderr)
    except BadReference as err:
        raise CommandError(str(err)) from None
    return pods[0][0]


async def _namespace_exists(http: KubeHttp, namespace: str, objects: list[dict[str, Any]]) -> bool:
    """Whether the namespace is there: a listed object is in it, or GET namespaces/NAME answers;
    False when it answers 404, or anything else (a miss then keeps explain's hint)."""
    if any((obj.get("metadata") or {}).get("namespace") == namespace for obj in objects):
        return True
    try:
        response = await http.request("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}", limited=False)
    except TRANSPORT_ERRORS:
        return False
    return response.ok


async def _explain(args: argparse.Namespace, target: Target) -> int:
    if args.config is not None:
        _config(args.config)  # a bad file fails before the cluster is read
    try:
        ref = reference(args.pod, args.namespace, target.namespace)
    except BadReference as err:
        raise CommandError(str(err)) from None
    if ref.podgroup_apis:
        return await _explain_group(args, target, ref)
    namespace, name = ref.namespace, ref.name
    http, listing = await _listing(target, [namespace])
    try:
        chosen = await _chosen(args, http)
        if ref.kind is not None:
            name = await _workload_pod(http, ref, listing.objects)
        pod = next((obj for obj in listing.objects if obj.get("kind") == "Pod"
                    and (obj.get("metadata") or {}).get("namespace") == namespace
                    and (obj.get("metadata") or {}).get("name") == name), None)
        uid = str((pod or {}).get("metadata", {}).get("uid") or "")
        events = await object_events(http, namespace, name, uid) if pod is not None else []
        _warn(listing)
        now = time.time()
        result = explaining.explain(listing.objects, f"{namespace}/{name}", chosen.config,
                                    events if isinstance(events, list) else [], now, listing.unread,
                                    events_unread=events if isinstance(events, str) else "",
                                    scheduler_namespace=args.scheduler_namespace)
        # it waits for Tessera (under a profile the configuration lacks too): does a replica lead?
        if result is not None and (result.dry_run is not None or (result.other_profile and not result.node)):
            result = explaining.with_leader(result, await _leader(http, chosen, args), _lease_source(args, chosen),
                                            args.scheduler_namespace)
        exists = result is not None or not read_as_namespace(args.pod) \
            or await _namespace_exists(http, namespace, listing.objects)
    finally:
        await http.api.close()
    if result is None:
        raise CommandError(not_found(replace(ref, name=name, kind=None)) + not_found_hint(args.pod, exists)
                           + _podgroup_instead(ref, listing.objects, target.namespace if args.namespace is None else ""))
    _print(explaining.as_dict(result), lambda: explaining.render(result, now), args.output)
    return 0


def _podgroup_instead(ref: Reference, objects: list[dict[str, Any]], context_namespace: str) -> str:
    """For a pod `ref` not found: the command for a PodGroup of that name, if the listing (which
    holds the PodGroups already: no request more) has one. A new user's `explain short` read
    kubectl's not-found line alone while PodGroup short existed. `context_namespace` is the one a
    command without -n reads ("" when -n was given: the command then keeps -n, or it would read
    the context's namespace)."""
    if ref.kind is not None:
        return ""
    apis = [api for api in PODGROUP_TYPES["podgroup"]
            if explaining_group.podgroup_object(objects, ref.namespace, ref.name, api) is not None]
    if not apis:
        return ""
    flag = f" -n {ref.namespace}" if ref.namespace != context_namespace else ""
    # in both APIs `podgroup/NAME` is ambiguous (`_explain_group`): name each
    names = [f"podgroup/{ref.name}"] if len(apis) == 1 else [f"{podgroup_resource(api)}/{ref.name}" for api in apis]
    return f"; a PodGroup {ref.name} exists: " + " or ".join(f"kubectl tessera explain{flag} {n}" for n in names)


async def _explain_group(args: argparse.Namespace, target: Target, ref: Reference) -> int:
    """`explain pg/NAME`: the PodGroup's gang (`explain_group`), looked for in `ref`'s APIs in
    order; one that is in both is ambiguous (say which), one unread where it was not found is said
    so rather than "not found"."""
    http, listing = await _listing(target, [ref.namespace])
    try:
        chosen = await _chosen(args, http)
        _warn(listing)
        found = [api for api in ref.podgroup_apis
                 if explaining_group.podgroup_object(listing.objects, ref.namespace, ref.name, api) is not None]
        if len(found) > 1:
            raise CommandError(f"{ref.namespace}/{ref.name} is a PodGroup of both APIs: say which, "
                               + " or ".join(f"{podgroup_resource(api)}/{ref.name}" for api in found))
        if not found:
            raise CommandError(_podgroup_missing(ref, listing))
        now = time.time()
        result = explaining_group.explain_group(listing.objects, ref.namespace, ref.name, found[0], chosen.config,
                                                now, listing.unread, args.scheduler_namespace)
        assert result is not None
        if result.member is not None and result.member.dry_run is not None:  # it waits for Tessera: who leads?
            member = explaining.with_leader(result.member, await _leader(http, chosen, args),
                                            _lease_source(args, chosen))
            result = replace(result, member=member)
    finally:
        await http.api.close()
    _print(explaining_group.as_dict(result), lambda: explaining_group.render(result), args.output)
    return 0


def _podgroup_missing(ref: Reference, listing: ClusterListing) -> str:
    """Why no PodGroup `ref` names was found: an API whose PodGroups could not be read in its
    namespace (a 404 while the API is not served lists none and is no error), else kubectl's words for
    the first API, the others looked in, and a close name."""
    for api in ref.podgroup_apis:
        unread = listing.unread.get(podgroup_kind(api).label)
        if unread is not None and not unread.read_in(ref.namespace):
            return f"{unread.name} cannot be read: {unread.why}"
    others = [podgroup_resource(api) for api in ref.podgroup_apis[1:]]
    close = get_close_matches(ref.name, explaining_group.group_names(listing.objects, ref.namespace,
                                                                     ref.podgroup_apis), n=1, cutoff=0.6)
    notes = ([f"nor {', '.join(others)}"] if others else []) + ([f'did you mean "{close[0]}"?'] if close else [])
    return not_found(ref) + (f" ({'; '.join(notes)})" if notes else "")


async def _what_if(args: argparse.Namespace, target: Target) -> int:
    if args.config is not None:
        for clash in _config(args.config).offline_clash_warnings():  # a bad file fails before the cluster is read
            print(f"warning: {clash}", file=sys.stderr)
    now = time.time()
    if args.rename and not args.filename:
        raise CommandError("--rename renames the objects of -f FILE: give the file", 2)
    probes, owners, made = _probes(args.filename, target.namespace, args.namespace, now, args.rename) \
        if args.filename else ([], [], [])
    added = [probe for probe in probes if probe_pods.adds_capacity(probe)]
    probes = [probe for probe in probes if not probe_pods.adds_capacity(probe)]
    from_file = ", ".join(args.filename or ()) if probes else ""  # a file of Nodes alone: the pending pods' outcomes
    namespaces = {target.namespace} | {str(probe["metadata"]["namespace"]) for probe in probes}
    http, listing = await _listing(target, namespaces)
    try:
        chosen = await _chosen(args, http)
        _warn(listing)
        changed = await _capacity(http, args, listing.objects, added)
        if from_file:
            classes = listing.unread.get(PRIORITY_CLASSES.label)
            try:
                notes = probe_pods.resolve_priorities(probes, listing.objects, classes.why if classes else None,
                                                      from_file)
            except probe_pods.ProbeError as err:
                raise CommandError(str(err)) from None
            for note in notes:
                print(f"warning: {note}", file=sys.stderr)
            probes = probe_pods.existing_claims_used(probes, made, listing.objects)
            workloads = await _existing(http, owners)
            existing = (probe_pods.clashes(probes, listing.objects) + capacity.existing(added, listing.objects)
                        + [str(owner) for owner in workloads])
            if existing:
                raise CommandError(f"{from_file}: already in the cluster: {', '.join(existing)}; what-if -f asks "
                                   "what creating them would do, and the apiserver would refuse a name in use: "
                                   "delete the existing object, give the file's objects other names, or pass "
                                   f"--rename to place copies of them named NAME{probe_pods.RENAME_SUFFIX}"
                                   + _scaling_hint(workloads))
            # LimitRanger admits a pod before ResourceQuota does: a pod it refuses is never created, so takes no quota
            probes, refused = await _limit_ranged(http, probes)
            limited = {refusal.pod for refusal in refused}
            refused += await _quota_refusals(http, [probe for probe in probes
                                                    if probe_pods.probe_keys([probe]).isdisjoint(limited)])
            result = whatif.what_if([*listing.objects, *probes], chosen.config, now,
                                    only=probe_pods.probe_keys(probes), from_file=from_file, unread=listing.unread,
                                    scheduler_namespace=args.scheduler_namespace, refused=refused, capacity=changed,
                                    seed=args.seed)
        else:
            existing = capacity.existing(added, listing.objects)
            if existing:
                raise CommandError(f"{', '.join(args.filename)}: already in the cluster: {', '.join(existing)}; "
                                   "what-if -f asks what creating them would do, and the apiserver would refuse a "
                                   "name in use: give the file's objects other names")
            namespace = None if args.all_namespaces or args.namespace is None else target.namespace
            result = whatif.what_if(listing.objects, chosen.config, now, namespace, unread=listing.unread,
                                    scheduler_namespace=args.scheduler_namespace, capacity=changed,
                                    seed=args.seed)
        # pods wait (under a profile the configuration lacks too): does a replica schedule them now?
        if result.outcomes or result.other_profile_pods:
            result = whatif.with_leader(result, await _leader(http, chosen, args), args.scheduler_namespace)
    finally:
        await http.api.close()
    _print(whatif.as_dict(result), lambda: whatif.render(result), args.output)
    return 0


async def _capacity(http: KubeHttp, args: argparse.Namespace, listed: Sequence[dict[str, Any]],
                    added: Sequence[dict[str, Any]]) -> capacity.Capacity:
    """The capacity the replay changes: the file's Nodes and ExtendedResources added, the nodes
    --without-node names (each must exist: kubectl's NotFound words) and those --without-nodes'
    selector matches (listed by the apiserver, which parses the selector as `kubectl get nodes -l`
    has it parsed: its errors are the apiserver's)."""
    names = list(args.without_node or ())
    missing = capacity.unknown_nodes(listed, names)
    if missing:
        raise CommandError("; ".join(f'--without-node: nodes "{name}" not found' for name in missing))
    selected_by = ""
    if args.without_nodes is not None:
        try:
            matched = await list_kind(http, NODES, selector=args.without_nodes)
        except (*TRANSPORT_ERRORS, ValueError) as err:
            raise CommandError(f"--without-nodes {args.without_nodes}: cannot list the nodes: "
                               f"{describe_error(err)}") from None
        if isinstance(matched, Response):
            raise CommandError(f"--without-nodes {args.without_nodes}: HTTP {matched.status}: {matched.message()}")
        if not matched:
            raise CommandError(f"--without-nodes {args.without_nodes}: no node matches it")
        names += [str((node.get("metadata") or {}).get("name")) for node in matched]
        selected_by = f"--without-nodes {args.without_nodes}"
    return capacity.Capacity(tuple(added), tuple(sorted(set(names))), selected_by)


async def _rollback_check(args: argparse.Namespace, target: Target) -> int:
    """Every namespace's pods are read (a GPU is given twice whichever namespace holds it), so -n
    does not narrow it; exit 1 when a rollback is not safe, as `kubectl diff` exits 1 on a
    difference, so a script stops there."""
    http, listing = await _listing(target, (), kinds=(PODS,))
    await http.api.close()
    result = rollback.check(listing.objects)
    _print(rollback.as_dict(result), lambda: rollback.render(result), args.output)
    return 0 if result.safe else 1


async def _quota_refusals(http: KubeHttp, probes: Sequence[dict[str, Any]]) -> list[quota.Refusal]:
    """The file's pods the ResourceQuotas of their namespaces would refuse (`quota.admit`)."""
    pods = [probe for probe in probes if probe.get("kind") == "Pod"]
    found = await _listed_in(http, quota.RESOURCE_QUOTAS, pods,
                             "cannot tell whether the ResourceQuotas of namespace {namespace} admit the file's pods",
                             "placed as if they do")
    refusals, warnings = quota.admit(pods, found)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return refusals


async def _limit_ranged(http: KubeHttp, probes: Sequence[dict[str, Any]]
                        ) -> tuple[list[dict[str, Any]], list[quota.Refusal]]:
    """The file's objects, its pods with the requests and limits the LimitRanges of their
    namespaces give them, and the pods those LimitRanges refuse (`limitrange.admit`), as the
    apiserver admits them before quota."""
    pods = [probe for probe in probes if probe.get("kind") == "Pod"]
    found = await _listed_in(http, limitrange.LIMIT_RANGES, pods,
                             "cannot tell which requests and limits the LimitRanges of namespace {namespace} give "
                             "the file's pods, or whether they admit them", "placed with those the file states")
    return limitrange.admit(probes, found)


async def _listed_in(http: KubeHttp, kind: ResourceKind, pods: Sequence[dict[str, Any]], cannot: str,
                     instead: str) -> list[dict[str, Any]]:
    """The `kind` objects of the `pods`' namespaces. A namespace whose objects cannot be listed is
    said on stderr in one line (`cannot`, with its {namespace}, then why and what is done
    `instead`) and taken as having none, as what-if takes a workload it cannot look up as absent; a
    404 (no such list: a fake or partial API) as having none, silently."""
    found: list[dict[str, Any]] = []
    for namespace in sorted({str(pod["metadata"]["namespace"]) for pod in pods}):
        listed: list[dict[str, Any]] | Response | str
        try:
            listed = await list_kind(http, kind, namespaced_path(kind, namespace))
        except (*TRANSPORT_ERRORS, ValueError) as err:
            listed = describe_error(err)
        if isinstance(listed, list):
            found += listed
            continue
        if isinstance(listed, Response) and listed.status == 404:
            continue
        why = listed if isinstance(listed, str) else (
            f"denied (HTTP 403): needs list on {kind.plural} in namespace {namespace} (the built-in view, edit "
            "and admin roles grant it)" if listed.status == 403 else f"HTTP {listed.status}")
        print(f"warning: {cannot.format(namespace=namespace)}: {why}; {instead}", file=sys.stderr)
    return found


# workload GETs of what-if -f in flight at once (a file of 200 Jobs: 200 GETs, one after another before)
OWNER_LOOKUPS = 8


def _scaling_hint(existing: Sequence[probe_pods.Owner]) -> str:
    """How to ask what scaling up an existing workload with `replicas` would do (a user on call
    asked that of what-if -f, which refuses a file naming it): its pods beyond those running are
    what a copy under another name with `replicas` the added ones creates; "" when none is one."""
    scalable = [owner for owner in existing if owner.kind in probe_pods.SCALED_KINDS]
    if not scalable:
        return ""
    owner = scalable[0]
    return (f"; to ask what scaling {owner} up would do, copy it under another name (say {owner.name}-more) with "
            "replicas: the replicas to add, and give what-if that file")


async def _existing(http: KubeHttp, owners: Sequence[probe_pods.Owner]) -> list[probe_pods.Owner]:
    """The file's workloads that exist already (GET answers, `OWNER_LOOKUPS` at a time; the
    listing holds no Jobs, Deployments or training jobs). Those that cannot be looked up are taken
    as absent, said on stderr in one line per reason (a user without `get jobs` read one warning
    per Job of the file)."""
    answers: list[str | None] = [None] * len(owners)  # "" exists, "-" absent, else why it cannot tell
    slots = anyio.Semaphore(OWNER_LOOKUPS)

    async def look_up(i: int, owner: probe_pods.Owner) -> None:
        async with slots:
            try:
                response = await http.request("GET", owner.path, limited=False)
            except TRANSPORT_ERRORS as err:
                answers[i] = describe_error(err)
                return
        answers[i] = "" if response.ok else "-" if response.status == 404 else f"HTTP {response.status}"

    async with anyio.create_task_group() as group:
        for i, owner in enumerate(owners):
            group.start_soon(look_up, i, owner)
    unknown: dict[str, list[str]] = {}
    for owner, answer in zip(owners, answers, strict=True):
        if answer not in ("", "-"):
            unknown.setdefault(str(answer), []).append(str(owner))
    for why, named in unknown.items():
        which = f"{named[0]} exists" if len(named) == 1 else \
            f"{len(named)} of the file's workloads exist ({first_few(named, 3)})"
        print(f"warning: cannot tell whether {which}: {why}; taken as absent", file=sys.stderr)
    return [owner for owner, answer in zip(owners, answers, strict=True) if answer == ""]


def _probes(filenames: Sequence[str], namespace: str, namespace_flag: str | None, now: float,
            rename: bool) -> tuple[list[dict[str, Any]], list[probe_pods.Owner], list[tuple[str, str]]]:
    """`what-if -f`'s pods (of every -f, as kubectl takes -f repeatedly; copies under new names
    with --rename), read before the cluster is (a bad file fails first), the workloads they are
    of, and the claims among them a controller would make (`probe_pods.read_files`' `made`)."""
    if list(filenames).count("-") > 1:
        raise CommandError("-f - names stdin more than once", 2)
    files: list[tuple[str, str]] = []
    for filename in filenames:
        try:
            text = sys.stdin.read() if filename == "-" else Path(filename).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise CommandError(f"cannot read {filename}: {getattr(err, 'strerror', None) or err}", 2) from None
        files.append((filename, text))
    notes: list[str] = []
    owners: list[probe_pods.Owner] = []
    made: list[tuple[str, str]] = []
    try:
        probes = probe_pods.read_files(files, namespace, namespace_flag, now, notes, owners, rename, made)
    except probe_pods.ProbeError as err:
        raise CommandError(str(err), 2) from None
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    return probes, owners, made


Command = Callable[[argparse.Namespace, Target], Awaitable[int]]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    target = replace(resolve(args.kubeconfig, args.context, args.namespace), impersonate=impersonation(args))
    if target.impersonate is None and (_groups(args) or args.as_uid):
        # client-go's clientcmd validation (validateAuthInfo), as kubectl prints it
        print(f"Error in configuration: requesting uid, groups or user-extra for {user_name(target)} without "
              "impersonating a user", file=sys.stderr)
        return 2
    func: Command = args.func
    try:
        return anyio.run(func, args, target)
    except CommandError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.status
    except ContextNotFound as err:  # kubectl's line (k8s.io/kubectl pkg/cmd/util/helpers.go checkErr)
        print(f"Error in configuration: {err.upstream}", file=sys.stderr)
        return 2
    except ConnectError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, KubeconfigError) else 1
    except BrokenPipeError:  # the reader of stdout went away (`| head`): stop quietly
        return reader_gone()
    except KeyboardInterrupt:
        return 130
