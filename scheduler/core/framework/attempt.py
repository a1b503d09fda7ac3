"""One scheduling attempt's outcome: the node and Binding annotations, or why not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scheduler.core.objects import Pod
from scheduler.core.volumes import ClaimBinding

# What a gang's cycle came to, on each of its attempts: "placed" — its minimum is met (members
# already bound count); "waiting" — it cannot be tried yet (a scheduler-plugins gang with too few
# members or no PodGroup, rejected in PreFilter: a Workload API gang then waits gated, untried);
# "failed" — tried, its minimum did not fit, nothing was kept.
GangOutcome = Literal["placed", "waiting", "failed"]


@dataclass(slots=True)
class Attempt:
    pod: Pod
    node: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    # what the pod's unbound WaitForFirstConsumer claims get on the node: the shell writes each
    # volume's claimRef, or the claim's selected-node, before the Binding (VolumeBinding)
    claims: tuple[ClaimBinding, ...] = ()
    message: str = ""
    # the log line's `message` where the pod's Event and condition (read by its namespace's
    # tenant) must say less: there pods of other namespaces are counted, here named, as an audit
    # needs them (`scheduler.core.tenants`); "" when both say the same
    logged: str = ""
    # the cycle failed with an error, not a rejection (upstream's Error status: a PreScore error):
    # `message` is the error; no preemption; the pod waits out its error backoff, and its status
    # reads SchedulerError
    error: bool = False
    rejectors: frozenset[str] = frozenset()
    # per scored node, each score plugin's normalised score and the `total`: every scored node's
    # when the core explains; the chosen node's and the `tied` ones' with `Scheduler`'s breakdown
    # (and more than one node fit); else None
    scores: dict[str, dict[str, int]] | None = None
    # other scored nodes whose total equalled the chosen node's (`score`): the pick among them was a
    # random tie-break (upstream's selectHost), so a dry run's node is one of several equals. How
    # many (`tied_count`), and the names of at most `cycle.TIED_NAMED` of them: a cluster of
    # identical nodes ties hundreds per decision, and the live loop never shows them
    tied: tuple[str, ...] = ()
    tied_count: int = 0
    score: int | None = None  # the chosen node's total score, when more than one node was scored
    filtered: dict[str, str] | None = None
    attempts: int = 1  # this attempt included (for the scheduling SLI metrics)
    queued_at: float = 0.0  # when the pod first entered the queue past its PreEnqueue plugins (the SLI start)
    deferred: bool = False  # placed, but a permit plugin holds its Binding (the allocation gate)
    gang_outcome: GangOutcome | None = None  # set on every attempt of a gang's cycle (see GangOutcome)
    preemption_tried: bool = False  # a PostFilter (preemption) ran for this attempt's pod or gang
    preempted: list[Pod] = field(default_factory=list)  # victims for this pod (or its gang), all of them
    # victim uid -> why it goes, in Tessera's words (victims.why_evicted): "" for a pod alone
    victim_reasons: dict[str, str] = field(default_factory=dict)
    # whom the victims make room for, in upstream's words (ExecutorPreemptor.Type(), pkg/scheduler/
    # framework/preemption/executor.go): "pod", or "podgroup" when a whole gang preempted as one
    preemptor_type: str = "pod"
    # victims that were waiting at Permit (the allocation gate): sent back to the queue in memory,
    # without an API call, as upstream's waitingPod.Preempt; the rest of `preempted` is evicted
    rejected_waiting: dict[str, str] = field(default_factory=dict)  # victim uid -> the node it waited on
    nominated_node: str | None = None  # status.nominatedNodeName to write: None leaves it, "" clears it
    # lower-priority pods nominated to the node this pod's preemption chose: their nominations go
    nominations_cleared: list[Pod] = field(default_factory=list)
