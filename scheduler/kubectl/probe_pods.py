"""`kubectl tessera what-if -f FILE`: pods that do not exist, as the apiserver would create them.

Why: "would an 8-GPU job fit now?" needed the job to be created (or a pod parked behind a
schedulingGate, which what-if skipped). The file's pods join the listed cluster as new pending
pods — after every pod already waiting, as the newest in the queue — and are replayed with them;
nothing is written.

A file holds YAML or JSON documents: Pods, workloads, `List`s of them (`kubectl get -o yaml`
output), and PodGroups (scheduler-plugins' or upstream's) for gangs; `-f` may be given more than
once (`read_files`). The claims, PersistentVolumes and StorageClasses a file holds join the dry run
with its pods (`STORAGE`: VolumeBinding reads them; a claim the file makes would otherwise be "not
found"). Its Nodes and ExtendedResources are capacity added to the cluster (`CAPACITY`,
`capacity.Capacity`): a file of Nodes alone asks where the pending pods would go with them.
Objects of other built-in kinds that never make pods (`NO_PODS`: a Service, a ConfigMap,
...) are skipped with a note, so an app's bundle can be passed whole; any other kind is an error, as it may make pods what-if cannot know of. A workload becomes the pods its
controller would create from its template, the template's labels and annotations kept (a gang's
among them, so the gang is judged whole):
- a Deployment or ReplicaSet: spec.replicas (default 1) pods, named `<name>-what-if-<i>` (the
  controllers add a random suffix: these names are synthetic);
- a StatefulSet: spec.replicas (default 1) pods with the names and labels its controller gives them,
  `<name>-<ordinal>`, from spec.ordinals.start (default 0) on (all of them, as podManagementPolicy
  Parallel creates them; OrderedReady creates each once the one before it is Ready), and the
  claims it makes from its volumeClaimTemplates for them (`_set_claims`: one that exists already is
  used as it is);
- a Job: the pods its controller starts first, min(parallelism, completions), default 1, named
  `<job>-<index>` (spec.suspend is not read: the question is where they would go once it runs).
- a Kubeflow training job (kubeflow.org/v1 PyTorchJob, TFJob, ...): each replica type's replicas,
  named `<job>-<type>-<index>` as the training operator names them. Its own PodGroup (made only
  with the operator's --gang-scheduler-name) is not made here: a note says so.
A pod gets what
the apiserver would give it: the namespace of -n (a different one in the file is an error, as
`kubectl create -f` says), a uid, a creation time of now, no node, phase Pending, and
`default-scheduler` when it names no scheduler (so a pod meant for Tessera must say
`schedulerName`). A pod keeps no schedulingGates: the question is where it would go. A pod's
generic `ephemeral` volume gets the claim the ephemeral volume controller would make for it
(`_ephemeral_claims`, controlled by the pod), unless one of that name exists.

A pod's priority is what the apiserver's Priority admission plugin would give it
(`resolve_priorities`, once the cluster's PriorityClasses are listed): its priorityClassName's value
and preemptionPolicy; with none named, the globalDefault class's (the lowest, if several), else 0
and PreemptLowerPriority; the built-in system-node-critical and system-cluster-critical need no read.

What the apiserver (or a training operator's webhook) would refuse is an error naming the object
and the field, in its words: a workload's missing, empty or malformed selector, template labels or
annotations that are not strings, a count beyond int32, a replica type the operator does not take.
So is a pod the scheduler's parser refuses (the replay would drop it unsaid), and a file of more
than MAX_PODS pods.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import yaml

from scheduler.core.disruption import parse_label_selector
from scheduler.core.objects import (DEFAULT_PREEMPTION_POLICY, GANG_NAME_LABEL, INT32_MAX, PODGROUP_LABEL,
                                    ObjectError, Pod, PriorityClass, gang_name, parse_device, parse_node, parse_pod,
                                    parse_priority_class, str_map)
from scheduler.core.selectors import LabelSelector
from scheduler.core.volumes import AVAILABLE, CLAIM_KIND, VOLUME_KIND

POD_GROUP_KIND = "PodGroup"
REPLICATED_KINDS = ("Deployment", "ReplicaSet")  # spec.replicas pods of spec.template, random names
SCALED_KINDS = (*REPLICATED_KINDS, "StatefulSet")  # spec.replicas pods of spec.template
# Kubeflow's training operator (v1): the field of each kind's replica specs
TRAINING_JOBS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
                 "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs"}
TRAINING_API = "kubeflow.org/"
# the replica types each kind's admission webhook takes (training-operator pkg/webhooks: TFJob's
# passes none, so it takes any)
TRAINING_TYPES = {"PyTorchJob": ("Master", "Worker"), "XGBoostJob": ("Master", "Worker"),
                  "PaddleJob": ("Master", "Worker"), "JAXJob": ("Worker",)}
TAKEN = ("Pods, Deployments, ReplicaSets, StatefulSets, Jobs, Kubeflow training jobs (kubeflow.org/v1 "
         f"{', '.join(TRAINING_JOBS)}), Nodes and tessera.dev ExtendedResources (capacity added), Lists of them "
         "and PodGroups")
# built-in kinds that never create pods, by (API group, kind): what-if -f skips them, with a note
# (a bundle's StorageClass, claim, Service, ConfigMap); True for a cluster-scoped kind. A kind not
# here and not taken (`TAKEN`) stays an error: a DaemonSet, a CronJob or a CRD's kind may create
# pods what-if cannot know of, and placing the rest as if they took nothing would mislead.
NO_PODS: dict[tuple[str, str], bool] = {
    **{("", kind): False for kind in ("ConfigMap", "Secret", "Service", "ServiceAccount", "PersistentVolumeClaim",
                                       "LimitRange", "ResourceQuota", "Endpoints")},
    ("", "PersistentVolume"): True, ("", "Namespace"): True,
    ("storage.k8s.io", "StorageClass"): True,
    ("rbac.authorization.k8s.io", "Role"): False, ("rbac.authorization.k8s.io", "RoleBinding"): False,
    ("rbac.authorization.k8s.io", "ClusterRole"): True, ("rbac.authorization.k8s.io", "ClusterRoleBinding"): True,
    ("networking.k8s.io", "NetworkPolicy"): False, ("networking.k8s.io", "Ingress"): False,
    ("networking.k8s.io", "IngressClass"): True, ("discovery.k8s.io", "EndpointSlice"): False,
    ("policy", "PodDisruptionBudget"): False, ("autoscaling", "HorizontalPodAutoscaler"): False,
}
# of those, the kinds VolumeBinding reads: taken into the dry run with the file's pods
STORAGE = frozenset({("", "PersistentVolumeClaim"), ("", "PersistentVolume"), ("storage.k8s.io", "StorageClass")})
# kinds that add capacity (`capacity.Capacity`): a Node, and the ExtendedResources a node agent (or
# `tessera dev-cluster`) publishes for its GPUs, taken as if created; cluster-scoped
CAPACITY = frozenset({("", "Node"), ("tessera.dev", "ExtendedResource")})
DEFAULT_SCHEDULER = "default-scheduler"  # the apiserver's default for spec.schedulerName
RENAME_SUFFIX = "-what-if"  # --rename: the copies' names (as the synthetic `<name>-what-if-<i>` pods')
MAX_PODS = 100_000  # the most pods one file may stand for: a replay of more would not end in useful time
REFUSED = "the apiserver would refuse it"


# the classes the apiserver creates at startup (pkg/apis/scheduling: SystemPriorityClasses)
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}


class ProbeError(Exception):
    """The file cannot stand for pods to create: one line for the user."""


def read_probes(text: str, source: str, namespace: str, namespace_flag: str | None, now: float,
                notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The objects the file at `source` (its `text`) would create, completed as the apiserver
    would complete them: pods (at least one) and the PodGroups beside them. `notes` gets what the
    user should know of a workload that the placement alone would not say (a warning each)."""
    return read_files([(source, text)], namespace, namespace_flag, now, notes)


@dataclass(frozen=True, slots=True)
class Owner:
    """A workload of the file whose pods what-if places (a Job, a Deployment, a PyTorchJob, ...):
    the caller GETs it (`path`), as an existing one is an error as an existing Pod is (`kubectl
    apply` of the file would create no pods for it)."""
    kind: str
    api_version: str
    namespace: str
    name: str

    @property
    def path(self) -> str:
        """Its URL path: the resource is the kind's lowercase plural, as for every kind expanded."""
        return (f"/apis/{self.api_version}/namespaces/{quote(self.namespace, safe='')}/{self.kind.lower()}s/"
                f"{quote(self.name, safe='')}")

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def read_files(files: Sequence[tuple[str, str]], namespace: str, namespace_flag: str | None, now: float,
               notes: list[str] | None = None, owners: list[Owner] | None = None,
               rename: bool = False, made: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """`read_probes` of several files (`-f a.yaml -f b.yaml`, as kubectl takes -f repeatedly),
    each (source, text): their objects together, at least one pod or Node among them, no name twice.
    Objects of a kind that makes no pods (`NO_PODS`: a claim, a StorageClass, a Service, ...) are
    skipped, one note per file naming them; any other kind is an error (`_completed`). `owners`
    gets the named workloads whose pods are among them (one with generateName cannot exist yet).
    `rename` (--rename): copies of the objects, each named NAME`RENAME_SUFFIX`, in gangs of their
    own (`_regrouped`): "what if I re-submitted this job", whose objects exist already.
    Among the objects are the claims the controllers would make for the pods (a StatefulSet's
    volumeClaimTemplates', `_set_claims`; a pod's generic ephemeral volumes', `_ephemeral_claims`),
    but for those the files hold themselves; `made` gets
    their (namespace, name): one that exists already is used as it is (`existing_claims_used`)."""
    notes = [] if notes is None else notes
    owners = [] if owners is None else owners
    made = [] if made is None else made
    made_claims: list[dict[str, Any]] = []
    created = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    objects: list[dict[str, Any]] = []
    empty: list[str] = []  # the workloads that would create no pod, said when there is none at all
    skipped_all: list[str] = []
    pods = 0
    for source, text in files:
        try:
            documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
        except yaml.YAMLError as err:
            raise ProbeError(f"{source}: not YAML: {' '.join(str(err).split())}") from None
        skipped: list[str] = []
        for number, document in enumerate(_flattened(documents, source), start=1):
            where = f"{source}: object {number}"
            if adds_capacity(document):
                objects.append(_capacity(document, where, created))
                continue
            if _makes_no_pods(document):
                if (_group(document), document["kind"]) in STORAGE:
                    objects.append(_storage(document, where, namespace, namespace_flag))
                else:
                    skipped.append(_skipped(document, where, namespace, namespace_flag))
                continue
            if rename:
                document = _renamed(document)
            completed = _completed(document, where, namespace, namespace_flag, created, notes, MAX_PODS - pods)
            if isinstance(completed, str):
                empty.append(completed)
            else:
                objects += [obj for obj in completed if obj["kind"] != CLAIM_KIND]
                made_claims += [obj for obj in completed if obj["kind"] == CLAIM_KIND]
                made_claims += [claim for obj in completed if obj["kind"] == "Pod"
                                for claim in _ephemeral_claims(obj, where)]
                pods += sum(1 for obj in completed if obj["kind"] == "Pod")
                owner = _owner(document, completed)
                if owner is not None:
                    owners.append(owner)
        if skipped:
            notes.append(f"{source}: skipped {len(skipped)} object{'' if len(skipped) == 1 else 's'} that make"
                         f"{'s' if len(skipped) == 1 else ''} no pods: {', '.join(skipped)}")
        skipped_all += skipped
    sources = ", ".join(source for source, _ in files)
    if not any(obj["kind"] in ("Pod", *(kind for _, kind in CAPACITY)) for obj in objects):
        if empty:
            raise ProbeError(f"{sources}: no pods in it: {'; '.join(empty)}: what-if -f places pods")
        only = (f" (only {', '.join(skipped_all)}, which make{'s' if len(skipped_all) == 1 else ''} no pods)"
                if skipped_all else "")
        raise ProbeError(f"{sources}: no Pod or workload in it{only}: what-if -f places pods (it takes {TAKEN})")
    if rename:
        _regrouped(objects)
    own = {_claim_key(obj) for obj in objects if obj["kind"] == CLAIM_KIND}
    made_claims = [claim for claim in made_claims if _claim_key(claim) not in own]
    objects += made_claims
    made += [_claim_key(claim) for claim in made_claims]
    names = Counter((obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in objects)
    twice = sorted(f"{kind} {ns}/{name}" for (kind, ns, name), times in names.items() if times > 1)
    if twice:
        raise ProbeError(f"{sources}: named more than once: {', '.join(twice)}")
    return objects


def _ephemeral_claims(pod: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """The claims the ephemeral volume controller makes for `pod`'s generic ephemeral volumes
    (pkg/controller/volume/ephemeral handleVolume): `<pod>-<volume>` (ephemeral.VolumeClaimName)
    in its namespace, with its volumeClaimTemplate's labels, annotations and spec, controlled by the
    pod (its uid: VolumeBinding takes no other's). Without them the dry run's pods waited "for
    ephemeral volume controller to create the persistentvolumeclaim", which on the cluster exists
    a moment after the pod does. A volume without a name, or a template the apiserver would not
    decode (`_claim_template`), is an error (`where`: the file's object), not a claim guessed at."""
    meta = pod["metadata"]
    said = f"{where}: Pod {meta['namespace']}/{meta['name']}"
    owner = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"], "controller": True,
             "blockOwnerDeletion": True}
    claims = []
    for i, volume in enumerate(pod["spec"].get("volumes") or ()):
        ephemeral = volume.get("ephemeral")
        template = ephemeral.get("volumeClaimTemplate") if isinstance(ephemeral, dict) else None
        if not isinstance(template, dict):
            continue
        if not volume.get("name"):  # ValidateVolumes (one that is no string the core's parser refused: `_valid`)
            raise ProbeError(f"{said}: spec.volumes[{i}].name: Required value: {REFUSED}")
        template_meta, spec = _claim_template(template, said, f"spec.volumes[{i}].ephemeral.volumeClaimTemplate")
        claim_meta: dict[str, Any] = {"name": f"{meta['name']}-{volume['name']}", "namespace": meta["namespace"],
                                      "ownerReferences": [dict(owner)]}
        for field in ("labels", "annotations"):
            if template_meta.get(field):
                claim_meta[field] = copy.deepcopy(template_meta[field])
        claims.append({"apiVersion": "v1", "kind": CLAIM_KIND, "metadata": claim_meta, "spec": spec})
    return claims


def _claim_template(template: Mapping[str, Any], where: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A claim template's metadata and a copy of its spec (`path`: the template's field in the
    object `where` says), as the apiserver decodes them: objects, labels and annotations maps of
    strings (`_object_meta`); else its refusal. Taken as they were, a list of labels crashed
    what-if and a spec that is no object became the made claim's."""
    meta = _object_meta(template, where, path)
    spec = template.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise ProbeError(f"{where}: {path}.spec: expected an object, got {type(spec).__name__}: {REFUSED}")
    return meta, copy.deepcopy(spec) or {}


def _claim_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A claim's (namespace, name)."""
    return str(obj["metadata"]["namespace"]), str(obj["metadata"]["name"])


def existing_claims_used(objects: Iterable[dict[str, Any]], made: Iterable[tuple[str, str]],
                         listed: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The file's `objects` less the claims a controller would make (`made`, by `read_files`)
    whose name a `listed` claim has: the controller makes none then and the pod has that one, as
    it is (the StatefulSet controller's createPersistentVolumeClaims creates only those not found;
    the ephemeral volume controller leaves one there, which VolumeBinding refuses the pod unless the
    pod controls it), not a name the apiserver would refuse."""
    existing = {(str((obj.get("metadata") or {}).get("namespace")), str((obj.get("metadata") or {}).get("name")))
                for obj in listed if obj.get("kind") == CLAIM_KIND}
    kept = set(made) & existing
    return [obj for obj in objects if obj["kind"] != CLAIM_KIND or _claim_key(obj) not in kept]


def _renamed(document: Any) -> Any:
    """`document` named NAME`RENAME_SUFFIX` (a copy), so what it makes is named after the new name
    too (a Job's pods, its job-name label); one named by generateName, or no object, as it is."""
    meta = document.get("metadata") if isinstance(document, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return document
    return {**document, "metadata": {**meta, "name": meta["name"] + RENAME_SUFFIX}}


def _regrouped(objects: list[dict[str, Any]]) -> None:
    """The renamed file's pods in the renamed gangs: a PodGroup label (scheduler-plugins) or
    spec.schedulingGroup.podGroupName (upstream) naming a PodGroup of the file (now NAME`RENAME_SUFFIX`)
    names the copy; a label gang's name (no object: a copy of the gang joining the running one
    would count its members among the copies' own) always gets the suffix. A PodGroup the file
    does not hold is kept: the copies join it, as created pods naming it would. The pods' affinity
    and spread selectors on their own renamed labels follow (`_reselected`)."""
    groups = {(obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in objects
              if obj["kind"] == POD_GROUP_KIND}

    def copied(namespace: str, name: Any) -> bool:
        return isinstance(name, str) and (namespace, name + RENAME_SUFFIX) in groups

    for pod in (obj for obj in objects if obj["kind"] == "Pod"):
        namespace, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels") or {}
        if copied(namespace, labels.get(PODGROUP_LABEL)):
            labels[PODGROUP_LABEL] += RENAME_SUFFIX
        if isinstance(labels.get(GANG_NAME_LABEL), str) and labels[GANG_NAME_LABEL]:
            labels[GANG_NAME_LABEL] += RENAME_SUFFIX
        group = pod["spec"].get("schedulingGroup")
        if isinstance(group, dict) and copied(namespace, group.get("podGroupName")):
            group["podGroupName"] += RENAME_SUFFIX
        for selector in _pod_selectors(pod["spec"]):
            _reselected(selector, labels)


def _pod_selectors(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The label selectors of a pod's inter-pod (anti-)affinity terms and topology spread
    constraints: those that select pods, as the copy's own labels may."""
    affinity = spec.get("affinity")
    affinity = affinity if isinstance(affinity, dict) else {}
    terms: list[Any] = []
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind)
        rules = rules if isinstance(rules, dict) else {}
        terms += rules.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        terms += [weighted.get("podAffinityTerm") for weighted in
                  rules.get("preferredDuringSchedulingIgnoredDuringExecution") or [] if isinstance(weighted, dict)]
    terms += spec.get("topologySpreadConstraints") or []
    return [term["labelSelector"] for term in terms
            if isinstance(term, dict) and isinstance(term.get("labelSelector"), dict)]


def _reselected(selector: dict[str, Any], labels: Mapping[str, Any]) -> None:
    """`selector` on the copy's own renamed labels (a value V where the copy's label is now
    V`RENAME_SUFFIX`: its Job's job-name, its PodGroup, its label gang) selecting the copies as
    well as the running originals: a re-submitted job's selects its own pods (kept on V alone, two
    copies would share a node an anti-affinity keeps them off), and the copies' other labels count
    the running pods as theirs; a matchLabels entry becomes an In of both."""
    def own(key: Any, value: Any) -> str | None:
        mine = labels.get(key) if isinstance(key, str) else None
        return mine if isinstance(value, str) and mine == value + RENAME_SUFFIX else None

    expressions = selector.get("matchExpressions") or []
    for expression in expressions:
        if isinstance(expression, dict) and isinstance(expression.get("values"), list):
            expression["values"] = [v for value in expression["values"]
                                    for v in (value, own(expression.get("key"), value)) if v is not None]
    match = selector.get("matchLabels")
    if isinstance(match, dict) and isinstance(expressions, list):
        both = {key: (value, copy) for key, value in match.items() if (copy := own(key, value)) is not None}
        selector["matchLabels"] = {key: value for key, value in match.items() if key not in both}
        selector["matchExpressions"] = [*expressions, *({"key": key, "operator": "In", "values": list(values)}
                                                        for key, values in both.items())]


def _owner(obj: Mapping[str, Any], completed: list[dict[str, Any]]) -> Owner | None:
    """The workload `obj` as an `Owner` (in its pods' namespace) when it is one and is named."""
    kind, name = obj.get("kind"), (obj.get("metadata") or {}).get("name")
    if kind in ("Pod", POD_GROUP_KIND) or not isinstance(name, str) or not name or not completed:
        return None
    return Owner(str(kind), str(obj.get("apiVersion") or ""), str(completed[0]["metadata"]["namespace"]), name)


def _makes_no_pods(obj: Any) -> bool:
    """Whether `obj` is of a built-in kind that never creates pods (`NO_PODS`, by API group: a
    Knative `serving.knative.dev` Service does create them)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        return False
    return (_group(obj), obj["kind"]) in NO_PODS


def _skipped(obj: dict[str, Any], where: str, namespace: str, namespace_flag: str | None) -> str:
    """How a skipped object is named: KIND NAME, KIND NAMESPACE/NAME for a namespaced kind (whose
    namespace must agree with -n, as for the rest: `kubectl create -f` refuses the file else)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    if NO_PODS[(_group(obj), obj["kind"])]:
        return f"{obj['kind']} {name}"
    return f"{obj['kind']} {_namespace(meta, where, namespace, namespace_flag)}/{name}"


def _storage(obj: dict[str, Any], where: str, namespace: str, namespace_flag: str | None) -> dict[str, Any]:
    """A copy of a claim, volume or StorageClass of the file as the dry run takes it: named, a
    claim in its namespace (which must agree with -n, as a pod's), the others in none. A volume
    without status.phase is Available: one about to be created, which the PV controller makes
    Available (VolumeBinding matches no other to a claim; a trial's file volumes, written without
    a status as one writes them, were never matched)."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["name"] = _name(meta, where)
    meta["namespace"] = "" if NO_PODS[(_group(obj), obj["kind"])] else _namespace(meta, where, namespace,
                                                                                   namespace_flag)
    status = obj.get("status")
    if obj["kind"] == VOLUME_KIND and (status is None or (isinstance(status, dict) and not status.get("phase"))):
        return {**obj, "metadata": meta, "status": {**(status or {}), "phase": AVAILABLE}}
    return {**obj, "metadata": meta}


def adds_capacity(obj: Any) -> bool:
    """Whether `obj` is of a kind that adds capacity (`CAPACITY`: a Node, an ExtendedResource)."""
    return isinstance(obj, dict) and (_group(obj), obj.get("kind")) in CAPACITY


def _capacity(obj: dict[str, Any], where: str, created: str) -> dict[str, Any]:
    """A copy of a Node or ExtendedResource of the file as the apiserver would create it (named,
    in no namespace, a uid, a creation time of now), checked by the core's parser: one it refuses
    would vanish from the replay unsaid."""
    meta = obj.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.update(name=_name(meta, where), namespace="", uid=str(uuid.uuid4()), creationTimestamp=created)
    meta.pop("generateName", None)
    meta.pop("resourceVersion", None)
    added = {**obj, "metadata": meta}
    try:
        (parse_node if obj["kind"] == "Node" else parse_device)(added)
    except ObjectError as err:
        raise ProbeError(f"{where}: {obj['kind']} {meta['name']} is not a valid {obj['kind']}: {err}") from None
    return added


def _group(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def resolve_priorities(probes: Iterable[dict[str, Any]], listed: Iterable[Mapping[str, Any]], unread: str | None,
                       source: str) -> list[str]:
    """Give the file's pods (in place) the priority, priorityClassName and preemptionPolicy the
    apiserver's Priority admission plugin would (plugin/pkg/admission/priority admitPod), from the
    PriorityClasses `listed`; `unread`: why they could not be read (None: they were). What the
    plugin would refuse is a `ProbeError` in its words; so is a class named that cannot be read.
    Returns what the user should know: pods naming no class while a globalDefault one cannot be
    known (replayed at the file's priority, else 0)."""
    classes = {str((obj.get("metadata") or {}).get("name")): _read_class(obj) for obj in listed
               if obj.get("kind") == "PriorityClass"}
    defaults = [pc for pc in classes.values() if isinstance(pc, PriorityClass) and pc.global_default]
    # more than one globalDefault (a race the plugin allows for): the lowest value wins
    default = min(defaults, key=lambda pc: pc.value) if defaults else None
    unknown_default: list[str] = []
    for pod in probes:
        if pod.get("kind") != "Pod":
            continue
        spec, meta = pod["spec"], pod["metadata"]
        said = f"Pod {meta['namespace']}/{meta['name']}"
        forbidden = f'{source}: {said}: pods "{meta["name"]}" is forbidden'
        named = spec.get("priorityClassName")
        if not named:
            if unread is not None:
                unknown_default.append(said)
                continue
            if default is None:
                value, policy = 0, DEFAULT_PREEMPTION_POLICY
            else:
                value, policy = default.value, default.preemption_policy
                spec["priorityClassName"] = default.name
        elif named in classes:
            if isinstance(named_class := classes[named], str):
                raise ProbeError(f"{source}: {said} names priorityClassName {named}, which cannot be read "
                                 f"({named_class}): its priority and preemptionPolicy are unknown")
            value, policy = named_class.value, named_class.preemption_policy
        elif named in SYSTEM_PRIORITY_CLASSES:
            value, policy = SYSTEM_PRIORITY_CLASSES[named], DEFAULT_PREEMPTION_POLICY
        elif unread is not None:
            raise ProbeError(f"{source}: {said} names priorityClassName {named}, but PriorityClasses cannot be read "
                             f"({unread}): its priority and preemptionPolicy are unknown")
        else:
            raise ProbeError(f"{forbidden}: no PriorityClass with name {named} was found: {REFUSED}")
        # the plugin refuses a pod giving either field otherwise than its class does, in these words
        computed: tuple[tuple[str, str, object], ...] = (
            ("priority", "the integer value of priority", value),
            ("preemptionPolicy", "the string value of PreemptionPolicy", policy))
        for field, field_said, should in computed:
            own = spec.get(field)
            if own is not None and own != should:
                raise ProbeError(f"{forbidden}: {field_said} ({own}) must not be provided in pod spec; priority "
                                 f"admission controller computed {should} from the given PriorityClass name: "
                                 f"{REFUSED}")
            spec[field] = should
    if not unknown_default:
        return []
    pods = ", ".join(unknown_default[:3]) + (f" and {len(unknown_default) - 3} more" if len(unknown_default) > 3 else "")
    given = {pod["spec"].get("priority") for pod in probes if pod.get("kind") == "Pod"} - {None}
    at = "the priority the file gives" if given else "priority 0"
    return [f"{pods} {'names' if len(unknown_default) == 1 else 'name'} no priorityClassName, and PriorityClasses "
            f"cannot be read ({unread}): a globalDefault PriorityClass would give "
            f"{'it its' if len(unknown_default) == 1 else 'them their'} priority; replayed at {at}"]


def _read_class(obj: Mapping[str, Any]) -> PriorityClass | str:
    """A listed PriorityClass as the scheduler reads it (`parse_priority_class`), else why it
    cannot be read: only a pod naming it needs it."""
    try:
        return parse_priority_class(obj)
    except ObjectError as err:
        return str(err)


def clashes(probes: Iterable[Mapping[str, Any]], listed: Iterable[Mapping[str, Any]]) -> list[str]:
    """The file's objects that exist in the cluster already (the apiserver would refuse to create them)."""
    existing = {(obj.get("kind"), (obj.get("metadata") or {}).get("namespace"), (obj.get("metadata") or {}).get("name"))
                for obj in listed}
    return [f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in probes
            if (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]) in existing]


def probe_keys(probes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """`namespace/name` of the file's pods."""
    return frozenset(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in probes
                     if obj["kind"] == "Pod")


def _flattened(documents: list[Any], source: str) -> list[Any]:
    """The documents with every List replaced by its items, Lists within Lists too (kubectl's
    resource.FlattenListVisitor); `items: null` is an empty List."""
    out: list[Any] = []
    stack: list[Iterator[Any]] = [iter(documents)]
    while stack:
        try:
            document = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        # `kubectl get -o yaml` prints a List; the API's own lists are PodList, DeploymentList, ...
        if isinstance(document, dict) and isinstance(document.get("kind"), str) and document["kind"].endswith("List"):
            items = document.get("items")
            if items is not None and not isinstance(items, list):
                raise ProbeError(f"{source}: object {len(out) + 1} is a {document['kind']} whose items are not a "
                                 f"list (got {type(items).__name__})")
            stack.append(iter(items or ()))
        else:
            out.append(document)
    return out


def _completed(obj: Any, where: str, namespace: str, namespace_flag: str | None,
               created: str, notes: list[str], room: int) -> list[dict[str, Any]] | str:
    """The objects `obj` would create (at most `room` pods), or for a workload that would create
    no pod, what says so."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
        raise ProbeError(f"{where}: not a Kubernetes object")
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    ns = _namespace(meta, where, namespace, namespace_flag)
    if kind == "Pod":
        name = _name(meta, where)
        pod = _pod(obj, name, ns, created, where)
        _valid(pod, f"{where}: Pod {ns}/{name} is")
        return [pod]
    if kind == "Job":
        return _job_pods(obj, _name(meta, where), ns, created, where, room)
    if kind in TRAINING_JOBS and str(obj.get("apiVersion") or "").startswith(TRAINING_API):
        return _training_pods(obj, str(kind), _name(meta, where), ns, created, where, notes, room)
    if kind in SCALED_KINDS:
        return _replica_pods(obj, str(kind), _name(meta, where), ns, created, where, notes, room)
    if kind == POD_GROUP_KIND:
        group = copy.deepcopy(obj)
        group["metadata"] = {**meta, "name": _name(meta, where), "namespace": ns, "uid": str(uuid.uuid4()),
                             "creationTimestamp": created}
        return [group]
    # a bundle's PriorityClasses (deploy/examples/preemption-batch.yaml): its pods' priorities are
    # the cluster's classes' (`resolve_priorities`), so the fix is to create them, not to skip them
    fix = ("; apply the PriorityClasses first (kubectl apply -f ...), then give what-if the rest, e.g. a file "
           "without them (the pods' priorities are read from the cluster's PriorityClasses)"
           if kind == "PriorityClass" else "")
    raise ProbeError(f"{where} is a {kind or 'object without a kind'}: what-if -f takes {TAKEN}{fix}")


def _namespace(meta: Mapping[str, Any], where: str, namespace: str, namespace_flag: str | None) -> str:
    own = meta.get("namespace")
    if own and namespace_flag is not None and own != namespace_flag:
        # kubectl create -f's refusal (k8s.io/cli-runtime resource.Builder)
        raise ProbeError(f"{where}: the namespace from the provided object \"{own}\" does not match the namespace "
                         f"\"{namespace_flag}\". You must pass '--namespace={own}' to perform this operation.")
    return str(own or namespace)


def _name(meta: Mapping[str, Any], where: str) -> str:
    name = meta.get("name")
    if isinstance(name, str) and name:
        return name
    generate = meta.get("generateName")
    if isinstance(generate, str) and generate:
        return f"{generate}what-if"
    raise ProbeError(f"{where}: metadata.name or generateName is required")


def _pod(obj: Mapping[str, Any], name: str, namespace: str, created: str, where: str) -> dict[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise ProbeError(f"{where}: Pod {namespace}/{name} has no spec.containers")
    if spec.get("nodeName"):
        raise ProbeError(f"{where}: Pod {namespace}/{name} sets spec.nodeName: it would not be scheduled at all")
    pod_spec = {k: v for k, v in copy.deepcopy(spec).items() if k != "schedulingGates"}
    pod_spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    meta = {**copy.deepcopy(obj.get("metadata") or {}), "name": name, "namespace": namespace,
            "uid": str(uuid.uuid4()), "creationTimestamp": created}
    meta.pop("generateName", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec, "status": {"phase": "Pending"}}


def _valid(pod: dict[str, Any], said: str) -> Pod:
    """`pod` as the scheduler reads it (the core's parser, as the replay and the live scheduler
    read pods); else an error: a pod it refuses would vanish from the replay unsaid."""
    named = pod["spec"].get("priorityClassName")
    if named is not None and not isinstance(named, str):  # the core does not read it; the apiserver's decoder
        raise ProbeError(f"{said.removesuffix(' is')}: Pod in version \"v1\" cannot be handled as a Pod: json: "
                         f"cannot unmarshal {_json_type(named)} into Go struct field PodSpec.spec.priorityClassName "
                         f"of type string: {REFUSED}")
    try:
        return parse_pod(pod)
    except ObjectError as err:
        raise ProbeError(f"{said} not a valid Pod: {err}") from None


def _json_type(value: Any) -> str:
    """What encoding/json calls a decoded YAML value in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def _gang(pod: Pod) -> str:
    """The gang `pod` joins as the core reads it (objects._gang), said for the user; "" for none
    (or a label gang of min-available 1, which waits for no other pod)."""
    gang = pod.gang
    if gang is None or (gang.min_available is not None and gang.min_available <= 1):
        return ""
    return f"{'PodGroup' if gang.from_podgroup else 'gang'} {gang_name(gang.key)}"


def _room(count: int, room: int, what: str, where: str) -> None:
    """Refuse a workload whose `count` pods would take the file past MAX_PODS."""
    if count > room:
        raise ProbeError(f"{where}: {what} would make {MAX_PODS - room + count} pods: what-if -f places at most "
                         f"{MAX_PODS} pods at once")


def _job_pods(job: Mapping[str, Any], name: str, namespace: str, created: str,
              where: str, room: int) -> list[dict[str, Any]] | str:
    spec, meta = _template(job, "Job", name, namespace, where)
    parallelism = _count(spec.get("parallelism"), 1, f"{where}: spec.parallelism")
    completions = spec.get("completions")
    pods = parallelism if completions is None else min(parallelism, _count(completions, 1, f"{where}: spec.completions"))
    if not pods:
        return f"Job {namespace}/{name} has {'parallelism' if not parallelism else 'completions'} 0"
    _room(pods, room, f"Job {namespace}/{name}: its {pods} pods", where)
    labels = {**(meta.get("labels") or {}), "batch.kubernetes.io/job-name": name}
    made = [_pod({"metadata": {**meta, "labels": labels}, "spec": spec["template"].get("spec")}, f"{name}-{index}",
                 namespace, created, where) for index in range(pods)]
    _valid(made[0], f"{where}: Job {namespace}/{name}: its pod {name}-0 is")  # one template: one check
    return made


def _replica_pods(workload: Mapping[str, Any], kind: str, name: str, namespace: str, created: str,
                  where: str, notes: list[str], room: int) -> list[dict[str, Any]] | str:
    """A Deployment's, ReplicaSet's or StatefulSet's pods: spec.replicas of its template."""
    spec, meta = _template(workload, kind, name, namespace, where)
    labels = meta.get("labels") or {}
    selector = _selector(spec.get("selector"), "statefulset" if kind == "StatefulSet" else "deployment",
                         f"{where}: {kind} {namespace}/{name}")
    if not selector.matches(labels):
        # apps/v1 validation: `selector` does not match template `labels`
        raise ProbeError(f"{where}: {kind} {namespace}/{name}: spec.selector ({_said(spec['selector'])}) does "
                         f"not match the template's labels ({_said({'matchLabels': labels})}): {REFUSED}")
    replicas = _count(spec.get("replicas"), 1, f"{where}: spec.replicas")
    if not replicas:
        return f"{kind} {namespace}/{name} has replicas 0"
    _room(replicas, room, f"{kind} {namespace}/{name}: its {replicas} replicas", where)
    start = _start_ordinal(spec, where, f"{where}: {kind} {namespace}/{name}") if kind == "StatefulSet" else 0
    pods = []
    for index in range(replicas):
        if kind == "StatefulSet":  # pkg/controller/statefulset/stateful_set_utils.go: getPodName, its labels
            pod_name = f"{name}-{start + index}"
            pod_labels = {**labels, "statefulset.kubernetes.io/pod-name": pod_name,
                          "apps.kubernetes.io/pod-index": str(start + index)}
        else:
            pod_name, pod_labels = f"{name}-what-if-{index}", labels
        pods.append(_pod({"metadata": {**meta, "labels": dict(pod_labels)}, "spec": spec["template"].get("spec")},
                         pod_name, namespace, created, where))
    gang = _gang(_valid(pods[0], f"{where}: {kind} {namespace}/{name}: its pod {pods[0]['metadata']['name']} is"))
    claims = _set_claims(spec, name, namespace, pods, start, where) if kind == "StatefulSet" else []
    if kind == "StatefulSet" and replicas > 1 and gang and spec.get("podManagementPolicy") != "Parallel":
        # pkg/controller/statefulset: OrderedReady waits for each pod to be Running and Ready
        notes.append(f"{where}: {kind} {namespace}/{name}: its pods are one gang ({gang}) and its podManagementPolicy "
                     f"is OrderedReady, which creates each pod only once the one before it is Running and Ready: "
                     f"{name}-{start} would wait for its gang, and {name}-{start + 1} would never be created; set "
                     "spec.podManagementPolicy: Parallel (placed here as Parallel creates them)")
    return [*pods, *claims]


def _start_ordinal(spec: Mapping[str, Any], where: str, said: str) -> int:
    """A StatefulSet's first ordinal (`said`: the set): spec.ordinals.start (StatefulSetStartOrdinal,
    GA in 1.31; getStartOrdinal), default 0, a non-negative int32 as apps/v1 validation takes it."""
    ordinals = spec.get("ordinals")
    if ordinals is not None and not isinstance(ordinals, dict):
        raise ProbeError(f"{said}: spec.ordinals: expected an object, got {type(ordinals).__name__}: {REFUSED}")
    start = (ordinals or {}).get("start")
    if isinstance(start, int) and not isinstance(start, bool) and start < 0:  # ValidateNonnegativeField
        raise ProbeError(f"{said}: spec.ordinals.start: Invalid value: {start}: must be greater than or equal to 0: "
                         f"{REFUSED}")
    return _count(start, 0, f"{where}: spec.ordinals.start")


def _set_claims(spec: Mapping[str, Any], name: str, namespace: str, pods: list[dict[str, Any]], start: int,
                where: str) -> list[dict[str, Any]]:
    """A StatefulSet's claims for its `pods` (in ordinal order, from `start`), made as its controller
    makes them (pkg/controller/statefulset/stateful_set_utils.go), and each pod's volumes naming its own: per
    volumeClaimTemplate and ordinal, a claim `<template>-<set>-<ordinal>`
    (getPersistentVolumeClaimName) in the set's namespace with the template's spec and labels, the
    selector's matchLabels over them (getPersistentVolumeClaims); the pod's volume of the template's
    name names it, in place of a template volume of that name (updateStorage). Ignored, the pods
    were placed with no claim at all, where the cluster left them waiting for volumes."""
    templates = spec.get("volumeClaimTemplates") or []
    if not isinstance(templates, list):
        raise ProbeError(f"{where}: StatefulSet {namespace}/{name}: spec.volumeClaimTemplates: expected a list, got "
                         f"{type(templates).__name__}: {REFUSED}")
    named: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i, template in enumerate(templates):
        meta = template.get("metadata") if isinstance(template, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise ProbeError(f"{where}: StatefulSet {namespace}/{name}: spec.volumeClaimTemplates[{i}].metadata.name: "
                             f"Required value: {REFUSED}")
        named.append((meta["name"], *_claim_template(template, f"{where}: StatefulSet {namespace}/{name}",
                                                     f"spec.volumeClaimTemplates[{i}]")))
    if not named:
        return []
    selected = spec["selector"].get("matchLabels") or {}
    claims = []
    for ordinal, pod in enumerate(pods, start):
        names = {template_name: f"{template_name}-{name}-{ordinal}" for template_name, _, _ in named}
        for template_name, meta, claim_spec in named:
            claim_meta = {**copy.deepcopy(meta), "name": names[template_name], "namespace": namespace}
            labels = {**(meta.get("labels") or {}), **selected}
            if labels:
                claim_meta["labels"] = labels
            claims.append({"apiVersion": "v1", "kind": CLAIM_KIND, "metadata": claim_meta,
                           "spec": copy.deepcopy(claim_spec)})
        own = [volume for volume in pod["spec"].get("volumes") or () if volume.get("name") not in names]
        pod["spec"]["volumes"] = [*({"name": template_name, "persistentVolumeClaim": {"claimName": claim}}
                                    for template_name, claim in names.items()), *own]
    return claims


def _training_pods(job: Mapping[str, Any], kind: str, name: str, namespace: str, created: str,
                   where: str, notes: list[str], room: int) -> list[dict[str, Any]] | str:
    """A Kubeflow training job's pods: each replica type's replicas (default 1) of its template,
    named and labelled as the training operator (v1) makes them: `<job>-<type, lowercased>-<index>`."""
    field = TRAINING_JOBS[kind]
    spec = job.get("spec")
    replica_specs = spec.get(field) if isinstance(spec, dict) else None
    if not isinstance(replica_specs, dict) or not replica_specs:
        raise ProbeError(f"{where}: {kind} {namespace}/{name} has no spec.{field}")
    first = ("Master", "Chief", "Launcher", "Scheduler")  # the coordinator first, as one reads the job
    order = sorted(replica_specs, key=lambda kind_name: (kind_name not in first, list(replica_specs).index(kind_name)))
    supported = TRAINING_TYPES.get(kind)
    counts: dict[Any, int] = {}
    for replica_type in order:
        replica_spec = replica_specs[replica_type]
        where_type = f"{where}: {kind} {namespace}/{name}: spec.{field}.{replica_type}"
        if supported is not None and replica_type not in supported:
            # the operator's webhook (pkg/webhooks/utils ValidateReplicaSpecs: field.NotSupported)
            said = ", ".join(f'"{t}"' for t in supported)
            raise ProbeError(f"{where}: {kind} {namespace}/{name}: spec.{field}[{replica_type}]: Unsupported value: "
                             f'"{replica_type}": supported values: {said}: the training operator\'s webhook would '
                             "refuse it")
        if not isinstance(replica_spec, dict) or not isinstance(replica_spec.get("template"), dict):
            raise ProbeError(f"{where_type} has no template")
        counts[replica_type] = _count(replica_spec.get("replicas"), 1, f"{where_type}.replicas")
    total = sum(counts.values())
    _room(total, room, f"{kind} {namespace}/{name}: its {total} replicas", where)
    pods: list[dict[str, Any]] = []
    gangs: set[str] = set()
    for replica_type in order:
        template = replica_specs[replica_type]["template"]
        meta = _template_meta(template, f"{where}: {kind} {namespace}/{name}", f"spec.{field}.{replica_type}.template")
        rtype = str(replica_type).lower()
        for index in range(counts[replica_type]):
            labels = {**(meta.get("labels") or {}), "training.kubeflow.org/job-name": name,
                      "training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)}
            pods.append(_pod({"metadata": {**meta, "labels": labels}, "spec": template.get("spec")},
                             f"{name}-{rtype}-{index}", namespace, created, where))
        if counts[replica_type]:  # one template: one check, and the gang its pods join
            gangs.add(_gang(_valid(pods[-1], f"{where}: {kind} {namespace}/{name}: its pod "
                                             f"{pods[-1]['metadata']['name']} is")))
    if not pods:
        return f"{kind} {namespace}/{name} has replicas 0"
    if gangs == {""} and len(pods) > 1:
        # the operator's PodGroup (pkg/controller.v1/common: minMember the total replicas, or
        # runPolicy.schedulingPolicy.minAvailable) exists only when it runs with --gang-scheduler-name
        notes.append(f"{where}: {kind} {namespace}/{name}: its templates name no gang, so its {len(pods)} pods are "
                     "placed one by one; if the training operator runs with --gang-scheduler-name it makes a "
                     f"PodGroup {namespace}/{name} (minMember {len(pods)}, or runPolicy.schedulingPolicy.minAvailable) "
                     f"and labels the pods {PODGROUP_LABEL}: {name}: put that PodGroup in the file and the label in "
                     "the templates to judge the job whole")
    return pods


def _template(workload: Mapping[str, Any], kind: str, name: str, namespace: str,
              where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workload's spec (with a spec.template) and its template's metadata."""
    spec = workload.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(template, dict):
        raise ProbeError(f"{where}: {kind} {namespace}/{name} has no spec.template")
    return spec, _template_meta(template, f"{where}: {kind} {namespace}/{name}", "spec.template")


def _template_meta(template: Mapping[str, Any], where: str, path: str) -> dict[str, Any]:
    """A pod template's metadata (`_object_meta`), less what the pod's own name and namespace replace."""
    return {key: value for key, value in _object_meta(template, where, path).items()
            if key not in ("name", "namespace")}


def _object_meta(template: Mapping[str, Any], where: str, path: str) -> dict[str, Any]:
    """A template's metadata ({} for none), an object whose labels and annotations are maps of
    strings, as the apiserver takes them; else its refusal (`where`: the object, `path`: the
    template's field)."""
    meta = template.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise ProbeError(f"{where}: {path}.metadata: expected an object, got {type(meta).__name__}: {REFUSED}")
    for field in ("labels", "annotations"):
        try:
            str_map((meta or {}).get(field), f"{path}.metadata.{field}")
        except ObjectError as err:
            raise ProbeError(f"{where}: {err}: {REFUSED}") from None
    return meta or {}


def _selector(selector: Any, kind: str, said: str) -> LabelSelector:
    """The workload's spec.selector, or the error apps/v1 validation gives (`said`: the workload;
    `kind` "deployment" for a Deployment or ReplicaSet, as upstream says for both, or
    "statefulset"): required, a LabelSelector (the core's parser: metav1 validation's
    ValidateLabelSelector), not empty."""
    if selector is None:
        raise ProbeError(f"{said}: spec.selector: Required value: {REFUSED}")
    try:
        parsed = parse_label_selector(selector, "spec.selector")
    except ObjectError as err:
        raise ProbeError(f"{said}: {err}: {REFUSED}") from None
    if parsed.empty:
        raise ProbeError(f"{said}: spec.selector: Invalid value: {{}}: empty selector is invalid for {kind}: {REFUSED}")
    return parsed


def _said(selector: Any) -> str:
    """A selector as kubectl prints one: app=web,tier in (db)."""
    if not isinstance(selector, dict):
        return str(selector)
    parts = [f"{key}={value}" for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or ():
        if isinstance(expression, dict):
            operator, values = str(expression.get("operator")), ",".join(map(str, expression.get("values") or ()))
            key = expression.get("key")
            parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": f"{key}",
                          "DoesNotExist": f"!{key}"}.get(operator, f"{key} {operator}"))
    return ",".join(parts) or "none"


def _count(value: Any, default: int, where: str) -> int:
    """A replica count: a non-negative int32, as the API types it."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProbeError(f"{where}: {value!r} is not a count")
    if value > INT32_MAX:
        raise ProbeError(f"{where}: Invalid value: {value}: out of range of int32 [0, {INT32_MAX}]: {REFUSED}")
    return value
