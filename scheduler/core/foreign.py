"""Other schedulers' keys on a pod of Tessera's: told, never read.

A trial of a team moving from Volcano and KAI-Scheduler switched pods to `schedulerName:
tessera` and kept the other scheduler's keys: a Volcano gang (`scheduling.k8s.io/group-name`,
minMember 4) half-bound in silence, and KAI fraction pods (`gpu-fraction`) were bound as CPU pods
with no GPU. Tessera still does not read these keys (docs/not-supported.md, "Coming from Volcano
or KAI-Scheduler"); it says so: `ClusterState` raises one `IGNORED_SCHEDULER_KEY` notice per pod
of its own that carries any (again only when the set of them changes), the live shell writes it
as a Warning Event, and `kubectl tessera explain` prints `ignored_note`. Pure.

The keys, as the other schedulers define them:
- Volcano (volcano.sh/apis, pkg/apis/scheduling/v1beta1/labels.go): `scheduling.k8s.io/group-name`
  (KubeGroupNameAnnotationKey) and `scheduling.volcano.sh/group-name`
  (VolcanoGroupNameAnnotationKey) name the pod's PodGroup; `scheduling.volcano.sh/queue-name`
  (QueueNameAnnotationKey) its queue; `volcano.sh/queue-name` (pkg/apis/batch/v1alpha1's
  QueueNameKey, a label or an annotation) too. A Volcano Job's own bookkeeping
  (`volcano.sh/job-name`, `volcano.sh/task-spec`) changes nothing about the pod and is not told.
- KAI-Scheduler (pkg/common/constants): the annotation `pod-group-name` (PodGroupAnnotationForPod)
  names its PodGroup; `gpu-fraction`, `gpu-memory` and `gpu-fraction-num-devices`
  (GpuFraction, GpuMemory, GpuFractionsNumDevices) ask for a GPU share; the label
  `kai.scheduler/queue` (DefaultQueueLabel; Run:ai's older `runai/queue`) names its queue.
A gang key is not told on a pod already in a gang of Tessera's (moved, the old key left on): it
is not scheduled alone.
"""

from __future__ import annotations

from collections.abc import Mapping

IGNORED_SCHEDULER_KEY = "IgnoredSchedulerKey"  # the Warning Event's reason
DOC = "docs/not-supported.md (Coming from Volcano or KAI-Scheduler)"

GANG, QUEUE, SHARE = "gang", "queue", "share"

# (where, key, scheduler, kind): where is "annotation" or "label"
_KEYS: tuple[tuple[str, str, str, str], ...] = (
    ("annotation", "scheduling.k8s.io/group-name", "Volcano", GANG),
    ("annotation", "scheduling.volcano.sh/group-name", "Volcano", GANG),
    ("annotation", "pod-group-name", "KAI-Scheduler", GANG),
    ("annotation", "scheduling.volcano.sh/queue-name", "Volcano", QUEUE),
    ("annotation", "volcano.sh/queue-name", "Volcano", QUEUE),
    ("label", "volcano.sh/queue-name", "Volcano", QUEUE),
    ("label", "kai.scheduler/queue", "KAI-Scheduler", QUEUE),
    ("label", "runai/queue", "KAI-Scheduler", QUEUE),
    ("annotation", "gpu-fraction", "KAI-Scheduler", SHARE),
    ("annotation", "gpu-memory", "KAI-Scheduler", SHARE),
    ("annotation", "gpu-fraction-num-devices", "KAI-Scheduler", SHARE),
)

_NOUN = {GANG: "gang", QUEUE: "queue", SHARE: "GPU sharing"}
_WHAT = {
    GANG: ("the pod is scheduled alone, not as a gang; use a scheduler-plugins PodGroup (pods labelled "
           "scheduling.x-k8s.io/pod-group) or the Workload API's spec.schedulingGroup"),
    QUEUE: "Tessera has no queues; use PriorityClasses (and Kueue for quota)",
    SHARE: ("the pod is given no GPU for them; ask for a share through a sharing ResourceClass, "
            "or for whole GPUs (nvidia.com/gpu)"),
}


def ignored_keys(annotations: Mapping[str, str], labels: Mapping[str, str], in_gang: bool) -> tuple[str, ...]:
    """The other schedulers' keys the pod carries that change what it means, as "annotation
    <key>" / "label <key>" in a fixed order; `in_gang`: the pod is in a gang of Tessera's (its
    gang keys are then not told)."""
    return tuple(f"{where} {key}" for where, key, _, kind in _KEYS
                 if not (in_gang and kind == GANG) and key in (annotations if where == "annotation" else labels))


def ignored_note(keys: tuple[str, ...]) -> str:
    """What the pod is told of its `keys` (`ignored_keys`): which scheduler's each is, what not
    reading it means, what to use instead. "" for none."""
    if not keys:
        return ""
    parts = []
    for kind in (GANG, SHARE, QUEUE):
        named = [(where, key, scheduler) for where, key, scheduler, of in _KEYS
                 if of == kind and f"{where} {key}" in keys]
        if named:
            schedulers = " and ".join(dict.fromkeys(scheduler for _, _, scheduler in named))
            listed = ", ".join(f"{where} {key}" for where, key, _ in named)
            parts.append(f"{listed} ({schedulers}'s {_NOUN[kind]}): {_WHAT[kind]}")
    return f"{'; '.join(parts)}. See {DOC}."


def ignored_message(pod_key: str, keys: tuple[str, ...]) -> str:
    """The Warning Event's message for a pod's `keys`."""
    return f"Pod {pod_key} carries another scheduler's keys, which Tessera does not read: {ignored_note(keys)}"
