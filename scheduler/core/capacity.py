"""What the cluster as it is could ever hold, empty: the requests of a pod, or a gang's minimum
together, beyond every node (or all of them).

Why here: upstream's "Insufficient" and a gang's "only 4 of the 5 members it needs fit" read the
same whether room frees up later or never will (a new user's trial). `kubectl tessera explain`
says which, and so do a gang's PodGroup Event (`coscheduling.unschedulable_notice`), `kubectl
tessera what-if` and the GPU map's waiting gangs (`and_never_fits`): one computation for all,
pure over the cluster state. The pods' own FailedScheduling messages stay upstream's words.
So does a gang with fewer pods at all than its minimum (`too_few_members`), said by the same texts
but the PodGroup Event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from functools import cached_property

from scheduler.core.classes import ResourceClass
from scheduler.core.framework.cycle_state import PodContext, prepare
from scheduler.core.objects import WORKLOAD_API, GangRef, Pod, PodGroup, SelectorTerm, gang_name, selects
from scheduler.core.plugins.topology.args import level_name
from scheduler.core.state import ClusterState, NodeInfo

# the node labels naming a domain of a gang's topology level `key` (widest first) and the level's
# word in messages, as the pod's profile's placement plugin reads them (`Scheduler.cluster_totals`)
LevelOf = Callable[[Pod, str], tuple[tuple[str, ...], str]]
# the nodes a gang's members may go to by their nodeSelector and required node affinity: each
# member's (sorted nodeSelector, required terms), a node counting when it suits any of them; None
# when some member selects no node in particular (every node counts)
Selection = frozenset[tuple[tuple[tuple[str, str], ...], tuple[SelectorTerm, ...] | None]] | None


def selection(members: Iterable[Pod]) -> Selection:
    """The `Selection` of a gang's `members`: a node no member may go to holds none of them, so
    it must not count towards what the gang could ever have (a trial's 4 x 8 GPUs selecting V100
    on three 8-GPU V100 nodes read "waiting for room" while the A100 nodes counted)."""
    found = set()
    for pod in members:
        if not pod.node_selector and pod.required_terms is None:
            return None
        found.add((tuple(sorted(pod.node_selector.items())), pod.required_terms))
    return frozenset(found) if found else None


def _suits(info: NodeInfo, among: Selection) -> bool:
    node = info.node
    assert node is not None
    if among is None:
        return True
    return any(selects(chosen, terms, node.meta.name, node.meta.labels) for chosen, terms in among)


def level_alone(pod: Pod, key: str) -> tuple[tuple[str, ...], str]:
    """A level no configuration names: its label's value alone names a domain (as upstream)."""
    return (key,), level_name(key)


def beyond_every_node(state: ClusterState, pod: Pod) -> tuple[str, ...]:
    """The pod's requests no node could hold even empty (a new user's trial: "Insufficient"
    alone does not say the pod can never fit as it is): a plain resource beyond every node's
    allocatable, more devices of a ResourceClass than any node has that the class may take, or
    more slices in one container than one matching device holds (a container's slices share one)."""
    ctx = prepare(pod, state.classes)
    infos = [info for info in state.node_infos() if info.node is not None]
    out = []
    for name, (amount, cls) in _asks(ctx, shared=False).items():
        most = max((_offers(state, info, name, cls) for info in infos), default=0)
        if amount > most:
            out.append(f"{_shown(name, amount)} {name} (the most any node offers: {_shown(name, most)})")
    for req in ctx.device_requests:
        if req.cls.sharing is not None:
            devices = [device for info in infos for device in state.class_devices(info, req.cls.name)]
            most = max((req.cls.sharing.slices_on(device) for device in devices), default=0)
            if req.count > most:
                out.append(f"{req.count} {req.resource_name} in container {req.container} "
                           f"(the most one device holds: {most})")
    return tuple(out)


class ClusterTotals:
    """What the schedulable nodes offer in all, per resource (and the ResourceClass providing it),
    each summed once: a view asks for every waiting gang, and that must not be gangs x nodes; and
    the same per topology domain, for gangs that must stay inside one (`level_of` names domains)."""

    def __init__(self, state: ClusterState, level_of: LevelOf) -> None:
        self.state = state
        self.level_of = level_of
        self._totals: dict[tuple[str, str | None, Selection], int] = {}
        self._domains: dict[tuple[tuple[str, ...], str, str | None, Selection], dict[tuple[str, ...], int]] = {}
        self._selected: dict[Selection, list[NodeInfo]] = {}

    @cached_property
    def _infos(self) -> list[NodeInfo]:
        """The schedulable nodes, read at the first sum: the live loop builds totals after every
        cycle (`Scheduler.group_notice`) and only a gang that placed nothing sums anything, so a
        walk over every node here would be paid by every decision."""
        return [info for info in self.state.node_infos() if info.node is not None and not info.node.unschedulable]

    def _among(self, among: Selection) -> list[NodeInfo]:
        """The schedulable nodes `among` lets the gang's members go to."""
        if among is None:
            return self._infos
        if among not in self._selected:
            self._selected[among] = [info for info in self._infos if _suits(info, among)]
        return self._selected[among]

    def of(self, resource: str, cls: ResourceClass | None, among: Selection = None) -> int:
        """What the schedulable nodes (those `among` selects) offer of `resource` in all."""
        key = (resource, cls.name if cls is not None else None, among)
        if key not in self._totals:
            self._totals[key] = sum(_offers(self.state, info, resource, cls) for info in self._among(among))
        return self._totals[key]

    def per_domain(self, chain: tuple[str, ...], resource: str, cls: ResourceClass | None,
                   among: Selection = None) -> dict[tuple[str, ...], int]:
        """What each domain named by the labels `chain` offers in all (its schedulable nodes with
        every label of the chain, and that `among` selects; a node missing one is in no domain of the level)."""
        key = (chain, resource, cls.name if cls is not None else None, among)
        if key not in self._domains:
            sums: dict[tuple[str, ...], int] = {}
            for info in self._among(among):
                assert info.node is not None
                labels = info.node.meta.labels
                if all(label in labels for label in chain):
                    path = tuple(labels[label] for label in chain)
                    sums[path] = sums.get(path, 0) + _offers(self.state, info, resource, cls)
            self._domains[key] = sums
        return self._domains[key]


def beyond_the_cluster(state: ClusterState, pod: Pod, totals: ClusterTotals) -> str:
    """Why the pod's gang can never fit as the cluster is: its `minimum` least-asking live members
    together ask for more of a plain resource, or of a ResourceClass's devices (or slices), than
    every schedulable node has in all (a new user's trial: "only 4 of the 5 members it needs fit"
    with every node "fits" did not say it); or, for a gang with a required topology level, than
    any one domain of that level has (the trial's rk3: three 8-GPU members in one rack of two
    8-GPU nodes only heard "no rack has room", which reads like a shortage that passes). `totals`:
    the cluster's (`Scheduler.cluster_totals`, shared when several gangs ask), naming domains as
    the pod's profile does."""
    if pod.gang is None:
        return ""
    minimum = state.group_min(pod.gang.key, pod)
    members = [state.pods[uid] for uid in state.gangs.members.get(pod.gang.key, ()) if uid in state.pods]
    if minimum is None or len(members) < minimum:
        return ""
    needs, providers = gang_needs(state, members, minimum)
    among = selection(members)
    nodes = ("the schedulable nodes" if among is None else
             "the schedulable nodes they may go to (by their nodeSelector and required node affinity)")
    for name in sorted(providers):
        cls = providers[name]
        total = totals.of(name, cls, among)
        if needs[name] > total:
            have = (f"{nodes} have" if cls is None
                    else f"the devices of ResourceClass {cls.name} on {nodes} hold" if among is not None
                    else f"the schedulable nodes' devices of ResourceClass {cls.name} hold")
            return (f"Its gang can never fit as the cluster is: its {minimum} members ask for {_shown(name, needs[name])} "
                    f"{name} together, and {have} {_shown(name, total)} in all.")
    topology = state.gangs.topology(pod.gang.key, pod)
    return _beyond_every_domain(pod, topology.required, minimum, needs, providers, totals, among) \
        if topology is not None and topology.required else ""


Needs = dict[str, int]  # resource name -> what a gang's minimum members ask for of it together
Providers = dict[str, ResourceClass | None]  # resource name -> the ResourceClass providing it (None: plain)


def gang_needs(state: ClusterState, members: Sequence[Pod], minimum: int) -> tuple[Needs, Providers]:
    """What the `minimum` least-asking of `members` ask for together, per resource (each
    resource's least askers: a lower bound of any `minimum` of them), and who provides each."""
    asks = [_asks(prepare(member, state.classes), shared=True) for member in members]
    providers = {name: cls for ask in asks for name, (_, cls) in ask.items()}
    needs = {name: sum(sorted(ask[name][0] if name in ask else 0 for ask in asks)[:minimum]) for name in providers}
    return needs, providers


def never_holds(state: ClusterState, nodes: Iterable[str], needs: Needs, providers: Providers) -> bool:
    """Whether the schedulable ones of `nodes`, empty, offer less in all than `needs` of some
    resource: no eviction there could make room for the gang (preemption's "not helpful" for a
    topology domain, as a request beyond a node's allocatable is for a node)."""
    infos = [info for name in nodes if (info := state.nodes.get(name)) is not None
             and info.node is not None and not info.node.unschedulable]
    return any(needs[name] > sum(_offers(state, info, name, cls) for info in infos)
               for name, cls in providers.items())


def _beyond_every_domain(pod: Pod, key: str, minimum: int, needs: Needs, providers: Providers,
                         totals: ClusterTotals, among: Selection = None) -> str:
    """The sentence for a gang whose required level `key` has no domain that could hold its
    `minimum` members' `needs`, empty; "" when one could, or when no node is in a domain (the
    placement's own refusal, `no node has the label ...`, says that)."""
    chain, word = totals.level_of(pod, key)
    short: dict[tuple[str, ...], str] = {}  # domain -> the first resource it has too little of
    domains: set[tuple[str, ...]] = set()
    for name in sorted(providers):
        offered = totals.per_domain(chain, name, providers[name], among)
        domains.update(offered)
        most = max(offered.values(), default=0)
        if offered and needs[name] > most:
            return (f"Its gang can never fit as the cluster is: its {minimum} members must share one {word} ({key}) "
                    f"and ask for {_shown(name, needs[name])} {name} together, and no {word}'s schedulable nodes "
                    f"have more than {_shown(name, most)} in all.")
        for path, amount in offered.items():
            if needs[name] > amount:
                short.setdefault(path, f"{'/'.join(path)} has {_shown(name, amount)} {name}")
    if not domains or set(short) != domains:
        return ""
    shown = "; ".join(short[path] for path in sorted(short)[:3]) + ("; ..." if len(short) > 3 else "")
    return (f"Its gang can never fit as the cluster is: its {minimum} members must share one {word} ({key}), "
            f"and no {word}'s schedulable nodes hold what they ask for together ({shown}).")


# JobSet's exclusive placement annotation (sigs.k8s.io/jobset api ExclusiveKey), which JobSet puts
# on the pods: the value names the topology label each child Job must have to itself
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# the labels mpi-operator v2 puts on an MPIJob's workers (v2beta1 constants.go; defaultLabels in
# mpi_job_controller.go): itself as operator, the pod's role ("launcher" on the launcher's)
MPI_WORKER = {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-role": "worker"}


def too_few_members(state: ClusterState, pod: Pod) -> str:
    """The sentence for a gang with fewer pods than its minimum at all (a Job of parallelism 4
    under a PodGroup of minMember 5): scheduler-plugins' "cannot find enough sibling pods,
    current pods number: 4, minMember of group: 5" reads like a wait that ends, and it never
    does until more pods are created or the minimum is lowered. Said as a fact, not as "never":
    a controller still creating the gang's pods reads the same (Tessera does not read Jobs), so
    it is no PodGroup Warning (`coscheduling.unschedulable_notice`: a gang with too few pods is
    not tried), only explain's, what-if's and the GPU map's words. Every member that has not
    finished exists, a leaving or gated one too (a controller replaces a deleted pod; a gate is
    lifted): "" while that many exist, or the minimum is not known.

    Why: fewer created or left than the minimum — a Job's parallelism below it, a ResourceQuota
    refusing the rest (a trial's Job of parallelism 4 under minMember 4 in a namespace whose quota
    took only 2 of its pods: the waiting members hold their quota, so the Job's retries never get
    room), members deleted (their node deleted, PodGC, a drain's eviction) that no controller
    creates again (a bare pod's, or a controller that gave up: Tessera keeps no record of deleted
    members, so it names the cause among the others), an operator still creating them — unless members succeeded (a trial's Job of
    parallelism 8 and completions 12 under minMember 8: after 8 succeeded the last 4 wait for
    ever, as upstream's, whose informer drops finished pods; "raise parallelism" was wrong advice
    there): then its last completions, fewer than the minimum. Failed members alone are replaced
    by a Job's controller, so they do not change the advice. A controller that creates some
    members only once others are placed or Ready is named instead (`_created_later`)."""
    return gang_too_few(state, pod.gang) if pod.gang is not None else ""


def gang_too_few(state: ClusterState, gang: GangRef) -> str:
    """`too_few_members`' sentence for the gang `gang` names, with or without a member (`kubectl
    tessera explain pg/NAME` of a PodGroup none of whose pods exist: "Only 0 pods ...")."""
    minimum = state.gangs.minimum_of(gang)
    alive = [pod for uid in state.gangs.members.get(gang.key, ()) if (pod := state.pods.get(uid)) is not None
             and not pod.terminal]
    existing = len(alive)
    if minimum is None or existing >= minimum:
        return ""
    what, field = (("PodGroup", "minCount" if gang.api == WORKLOAD_API else "minMember") if gang.from_podgroup
                   else ("gang", "min-available"))
    short = minimum - existing
    ended = Counter(state.pods[uid].phase for uid in state.gangs.history.get(gang.key, ())
                    if uid in state.pods and state.pods[uid].terminal)
    succeeded, failed = ended["Succeeded"], ended["Failed"]
    if succeeded:
        why = (f"{succeeded} of its members succeeded{f' and {failed} failed' if failed else ''}, and finished members "
               f"are not counted: a Job's last completions fewer than {field} never start; lower {field}, or make "
               f"completions a multiple of it")
    elif later := _created_later(alive, field):
        why = later
    else:
        why = (f"fewer than {field} were created or remain: a Job's parallelism below it, a ResourceQuota refusing the "
               f"rest (the Job's FailedCreate Events say so; the members waiting keep the quota they hold, so it does "
               f"not clear), members deleted (a node deleted, PodGC, a drain) and not re-created by their controller, "
               f"or a controller still creating them; raise what limits them, re-create the deleted ones, or lower "
               f"{field}")
    return (f"Only {existing} pod{'' if existing == 1 else 's'} of {what} {gang_name(gang.key)} "
            f"exist{'s' if existing == 1 else ''} and its {field} is {minimum}: no member is tried until {short} more "
            f"{'is' if short == 1 else 'are'} created ({why}).")


def _created_later(alive: Sequence[Pod], field: str) -> str:
    """Why a gang's `alive` members fall short for ever when their controller creates the rest
    only once some are placed or Ready, which a minimum counting them never lets happen; "" when
    the members show no such controller.

    - JobSet's exclusive placement (`JOBSET_EXCLUSIVE` on a member): its pod webhook refuses a
      child Job's followers until its leader is scheduled ("leader pod not yet scheduled, not
      creating follower pod"; a trial's JobSet under minMember 6 with only its 3 leaders created).
    - mpi-operator v2 with `launcherCreationPolicy: WaitForWorkersReady`: it creates the launcher
      only once every worker is Ready, while the PodGroup it makes counts it (minMember workers +
      1, calculateMinAvailable; a trial's). Members that are all workers (`MPI_WORKER`) say the
      launcher does not exist: its template gets the same pod-group label, so one that exists is
      a member (KAI's MPI grouper looks for it by the same job-role label and lowers its
      minAvailable while none exists). Tessera does not read MPIJobs: the policy is named as the
      likely cause, not known."""
    if any(JOBSET_EXCLUSIVE in member.meta.annotations for member in alive):
        return (f"its pods carry JobSet's {JOBSET_EXCLUSIVE}: JobSet creates a child Job's followers only once its "
                f"leader is scheduled, and no member is tried before {field} exist; lower {field} to the pods that "
                f"exist before any is placed, the leaders")
    if alive and all(MPI_WORKER.items() <= member.meta.labels.items() for member in alive):
        return (f"its pods are MPI Operator workers and its launcher does not exist: with launcherCreationPolicy "
                f"WaitForWorkersReady the MPI Operator creates the launcher only once every worker is Ready, and no "
                f"member is tried before {field} exist; set the MPIJob's runPolicy.schedulingPolicy.minAvailable to "
                f"its worker count")
    return ""


def and_never_fits(message: str, state: ClusterState, pod: Pod, totals: ClusterTotals) -> str:
    """`message` (a gang's reason to wait) with `beyond_the_cluster`'s sentence after it, when
    the pod's gang can never fit, or `too_few_members`' when too few of its pods exist: Tessera's
    own texts (a PodGroup's Event, what-if's result, the GPU map's gangs) say it; "" and no such
    gang: `message` as it is."""
    return with_sentence(message, never_fits(state, pod, totals))


def never_fits(state: ClusterState, pod: Pod, totals: ClusterTotals) -> str:
    """`and_never_fits`' sentence for the pod's gang alone ("" when none). It reads the gang, not
    the pod: its key, minimum, topology and the pod's profile (how it names domains), which
    `never_fits_key` gathers, so a report asking for every member of a large gang asks once."""
    return beyond_the_cluster(state, pod, totals) or beyond_min_resources(state, pod) or too_few_members(state, pod)


def cluster_wanted(min_resources: Mapping[str, int], min_member: int) -> dict[str, int]:
    """What scheduler-plugins' minResources check asks the nodes to have free together: the
    PodGroup's `spec.minResources` and one pod slot per `minMember` (its `pods` quantity,
    PodGroupManager.PreFilter)."""
    return {**min_resources, "pods": min_member}


def beyond_min_resources(state: ClusterState, pod: Pod) -> str:
    """Why the pod's PodGroup's minResources can never be met as the cluster is: one of them (or
    its pod slots) is more than every node allocates in all, so the nodes could never have it
    free together even empty. Every node counts, cordoned ones too, as upstream's check
    (CheckClusterResource) sums the snapshot's nodes; a ResourceClass's resource counts the
    devices the class matches (`min_resource_class`); "" when the gap can close (or there is none)."""
    return min_resources_beyond(state, state.gangs.podgroup_of(pod))


def min_resources_beyond(state: ClusterState, group: PodGroup | None) -> str:
    """`beyond_min_resources`' sentence for PodGroup `group` itself (a PodGroup explained whole,
    with or without members); "" for None."""
    if group is None or not group.min_resources:
        return ""
    infos = [info for info in state.node_infos() if info.node is not None]
    for name, amount in sorted(cluster_wanted(group.min_resources, group.min_member).items()):
        served, cls = min_resource_class(state, name)
        total = 0 if served and cls is None else sum(_offers(state, info, name, cls) for info in infos)
        if amount > total:
            what = (f"its minMember of {amount} asks for {amount} pods free" if name == "pods"
                    else f"they ask for {_shown(name, amount)} {name} free")
            have = (f"the nodes have {_shown(name, total)} in all" if not served
                    else "no usable ResourceClass serves it" if cls is None
                    else f"the devices of ResourceClass {cls.name} hold {total} in all")
            return f"The PodGroup's minResources can never be met as the cluster is: {what}, and {have}."
    return ""


def min_resource_class(state: ClusterState, name: str) -> tuple[bool, ResourceClass | None]:
    """Whether a PodGroup's `minResources` entry `name` is a ResourceClass's resource, and the
    usable class serving it (None: a plain resource, or a class resource no usable class serves).
    Kubeflow's training operator fills minResources by summing its pods' requests, so a job of
    class requests gets a class's name there; the nodes need not allocate it (a device plugin
    advertises `nvidia.com/gpu`): it is served by the devices its class matches, as the pods' own
    requests are, and those are what the check counts."""
    if not state.classes.is_class_resource(name):
        return False, None
    return True, state.classes.resource_class(name)


def class_free(state: ClusterState, info: NodeInfo, cls: ResourceClass, own: Set[str]) -> int:
    """What the node has free of ResourceClass `cls`'s resource for a group whose placed members
    are `own` (scheduler-plugins' minResources check counts what the group's own pods hold as
    free: getNodeResource removes them from the node; and reads the snapshot, which has no
    nominated pod: a nominated preemptor's hold uses nothing here): its matching schedulable
    devices no other real holder uses, no more per device resourceName than the node's count of
    it leaves beside the others' use (`_offers`' limit, the planner's); of a sharing class, the
    slices the devices no other real holder holds whole have room for beside the others' slices,
    those of devices no other real holder uses only on as many of them as that count leaves (the
    planner's: a slice there makes one more GPU busy; the fullest-roomed first)."""
    ledger = state.ledger
    sharing = cls.sharing
    free: Counter[str] = Counter()  # of a sharing class: the slices of GPUs another pod uses
    unused: dict[str, list[int]] = {}  # per resource: the room (devices, or slices) of each GPU the group alone uses
    for device in state.class_devices(info, cls.name):
        use = ledger.use.get(device.name)
        whole, sliced = ledger.holders(use) if use is not None else (set(), set())
        if whole - own:
            continue
        if sharing is None:
            if not sliced - own:
                unused.setdefault(device.resource_name, []).append(1)
            continue
        capacity = device.capacity.get(sharing.dimension)
        if capacity is None:
            continue
        used = ledger.shared_use(use, sharing.dimension)
        if use is not None:
            for uid in use.shared.keys() - (sliced - own):  # the group's own slices and the holds'
                held = ledger.by_dimension(use.shared[uid])
                used -= held.get(sharing.dimension, 0) + held.get("", 0)
        slices = max(0, int((capacity - used) // sharing.unit))
        if sliced - own:
            free[device.resource_name] += slices  # in use by another pod: a slice costs the count nothing
        else:
            unused.setdefault(device.resource_name, []).append(slices)
    assert info.node is not None
    allocatable = info.node.allocatable

    def count_left(resource: str) -> int:
        """The node's count of it less what others use: the group's own plain requests and devices are free."""
        return max(0, allocatable[resource] - info.real_used(resource) + own_used(state, info, own, resource))

    return sum(free.values()) + sum(_within_count(rooms, count_left(resource) if resource in allocatable else None)
                                    for resource, rooms in unused.items())


def _within_count(rooms: Iterable[int], left: int | None) -> int:
    """What a class's GPUs of one device resourceName offer together when a request there makes
    each one busy that no other pod uses (a device whole, or the first slice of it), and the node's
    count of that name (`nvidia.com/gpu`) leaves `left` more GPUs to make busy (None: the node
    counts none of it): the `rooms` (1 per device, or its slices) of the `left` roomiest — the
    planner's limit (`count_short`), for what is free now (`class_free`) and for the node empty
    (`_offers`)."""
    return sum(sorted(rooms, reverse=True)[:left])


def own_used(state: ClusterState, info: NodeInfo, own: Set[str], resource: str) -> int:
    """What of the node's `info.real_used(resource)` the group whose placed members are `own`
    holds itself, and so counts as free (scheduler-plugins' getNodeResource removes the group's
    own pods from the node): its members' requests of it as charged — a request their devices
    stand for is charged as those devices alone (`ledger.counted_requests`) — and the devices
    counted as it that only its members hold (nominated preemptors' holds aside: not in
    `real_used`), whole or in slices, through a class or a plain request, on the node's own
    devices or by the name of a device kept elsewhere (`ledger.counted_elsewhere`): a GPU any
    other pod holds by either name is not theirs alone. Not the members'
    requests as written: a request a shared device stands for would free the device another pod
    still holds a slice of, and a class's device would not be freed at all."""
    ledger = state.ledger
    held = sum(state.placements[uid].requests.get(resource, 0) for uid in info.pods & own)
    kept = ledger.elsewhere.get(info.name, {})
    for name, device in info.devices.items():
        use = ledger.use.get(name)
        if use is None or ledger.counted_as(name) != resource:
            continue
        whole, sliced = ledger.holders(use)
        # a pod holding its GPU by the name of a device kept elsewhere holds it too (a duplicate held by hand)
        if (whole or sliced) and not (whole | sliced | kept.get(device.device_id, {}).keys()) - own:
            held += 1
    return held + sum(1 for counted, holders in ledger.counted_elsewhere(info) if counted == resource
                      and not holders - own)


def never_fits_key(state: ClusterState, pod: Pod) -> tuple[object, ...] | None:
    """What `never_fits` reads of `pod` beyond the state (None: not a gang member, no sentence)."""
    if pod.gang is None:
        return None
    key = pod.gang.key
    return (key, pod.gang.api, pod.gang.from_podgroup, state.group_min(key, pod), state.gangs.topology(key, pod),
            pod.scheduler_name)


def with_sentence(message: str, never: str) -> str:
    """`message` with the `never_fits` sentence `never` after it (either may be empty)."""
    if not never or not message:
        return message or never
    return f"{message}{'' if message.endswith('.') else '.'} {never}"


def _asks(ctx: PodContext, shared: bool) -> dict[str, tuple[int, ResourceClass | None]]:
    """What the pod asks for by resource name, with the ResourceClass that provides it (None for
    a plain resource): its plain requests and the devices of each exclusive class it holds at
    its peak (`shared`: and the slices of each sharing class)."""
    asks: dict[str, tuple[int, ResourceClass | None]] = {name: (amount, None) for name, amount in ctx.plain}
    by_name = {req.cls.name: req.cls for req in ctx.device_requests}
    for kind in (False, True) if shared else (False,):
        for name, count in ctx.class_needs(kind).items():
            asks[by_name[name].resource_name] = (count, by_name[name])
    return asks


def _offers(state: ClusterState, info: NodeInfo, resource: str, cls: ResourceClass | None) -> int:
    """What the node, empty, offers one pod of `resource`: its allocatable of a plain resource;
    of a class's, the devices the class may take there (`ClusterState.class_devices`), or for a
    sharing class the slices they hold, on no more of them than the node counts of their own
    resource name (the planner's limit, `_within_count`: a slice makes an idle GPU busy too)."""
    assert info.node is not None
    allocatable = info.node.allocatable
    if cls is None:
        return allocatable.get(resource, 0)
    sharing = cls.sharing
    rooms: dict[str, list[int]] = {}
    for device in state.class_devices(info, cls.name):
        rooms.setdefault(device.resource_name, []).append(sharing.slices_on(device) if sharing is not None else 1)
    return sum(_within_count(each, allocatable.get(name)) for name, each in rooms.items())


def _shown(resource: str, amount: int) -> str:
    """An amount as a request is written: CPU in cores (the core counts millicores)."""
    return f"{amount / 1000:g}" if resource == "cpu" else str(amount)
