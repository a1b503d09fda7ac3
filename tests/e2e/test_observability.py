"""What a user sees of a running `tessera run` with kubectl and Prometheus (issue 10, part 3.6):

- `/metrics` agrees with `/readyz` the moment it says ready (informers synced, the nodes and
  devices counted), instead of lagging a refresh period behind;
- every write Tessera makes is attributed to field manager `tessera` (`metadata.managedFields`),
  not the client library's `OpenAPI-Generator`: pod status, class status, Events, the Lease;
- a ResourceClass status names the effective resourceName, so the RESOURCENAME column of
  `kubectl get resourceclasses` is filled for classes that leave it to the default; a sharing
  class whose devices lack its dimension is `Valid=False` with the reason;
- the Grafana dashboard (deploy/grafana) and the chart's alert rules query only series a running
  scheduler serves (issue 16);
- a class on the devices' own resourceName (`nvidia.com/gpu`) is `Valid=False` and a plain GPU pod
  is bound beside it as a count (a new user's trial: it waited `Insufficient` beside free GPUs).
- `tessera_devices{state}` counts the GPUs `kubectl tessera nodes` shows, in its states: a cordoned
  node's GPUs, an admin-cordoned device, a GPU two pods claim, a fenced node's GPUs (a trial).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kube.http import MERGE_PATCH
from scheduler.sim import builders as b
from tests import dashboard
from tests.deploy_manifests import find, helm_binary, helm_template
from tests.e2e.live import REPO, Kube, TesseraProcess, bound_nodes, eventually, fast_lease_config

CLASSES = "/apis/tessera.dev/v1alpha1/resourceclasses"
ERS = "/apis/tessera.dev/v1alpha1/extendedresources"
PLUGIN = Path(sys.executable).parent / "kubectl-tessera"  # the package's console script
KINDS = ("ExtendedResource", "Node", "Pod", "PodGroup", "ResourceClass")


@contextlib.asynccontextmanager
async def _running(plane: LocalControlPlane, tmp_path: Path, stem: str,
                   nodes: int = 1) -> AsyncIterator[tuple[TesseraProcess, list[str], str]]:
    """A ready `tessera run` process (its own Lease, named `<stem>-<random>`) on `nodes` fresh fake
    nodes of 2 V100s; yields (process, node names, that name); stops it and removes the nodes."""
    prefix = f"{stem}-{secrets.token_hex(3)}"
    names = plane.add_fake_gpu_nodes(nodes, 2, "V100", prefix=prefix)
    proc = TesseraProcess(plane.kubeconfig, fast_lease_config(tmp_path, prefix), tmp_path)
    proc.start()
    try:
        await proc.wait_ready()
        yield proc, names, prefix
    finally:
        assert proc.terminate() == 0, proc.log()
        plane.remove_fake_gpu_nodes(names)


async def _metrics_text(port: int) -> str:
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
            return await response.text()


async def _metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = await _metrics_text(port)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


async def _printed(plane: LocalControlPlane, path: str) -> dict[str, dict[str, str]]:
    """The server-side printed table (as kubectl gets it): name -> column -> cell."""
    headers = {"Authorization": f"Bearer {plane.admin_token}", "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    async with aiohttp.ClientSession(trust_env=False) as session:
        async with session.get(plane.server + path, headers=headers, ssl=context) as response:
            table = await response.json()
    names = [column["name"] for column in table["columnDefinitions"]]
    return {row["cells"][0]: dict(zip(names, map(str, row["cells"]))) for row in table["rows"]}


def _managers(obj: dict[str, Any], subresource: str = "") -> set[str]:
    return {entry["manager"] for entry in obj["metadata"].get("managedFields") or ()
            if entry.get("subresource", "") == subresource}


async def test_metrics_agree_with_readyz_as_soon_as_it_says_ready(clean_cluster: LocalControlPlane,
                                                                   tmp_path: Path) -> None:
    async with _running(clean_cluster, tmp_path, "obs", nodes=2) as (proc, _, _):
        metrics = await _metrics(proc.port)  # the first scrape after /readyz said 200
    assert {kind: metrics[("tessera_informer_synced", (("kind", kind),))] for kind in KINDS} == dict.fromkeys(KINDS, 1)
    assert metrics[("scheduler_cache_size", (("type", "nodes"),))] == 2
    assert metrics[("tessera_devices", (("state", "free"),))] == 4


async def test_a_replica_says_which_code_and_configuration_it_runs(clean_cluster: LocalControlPlane,
                                                                      tmp_path: Path) -> None:
    """A day-2 trial: during a rolling upgrade nothing told which code or configuration a replica
    ran. `/configz` serves the effective configuration (kube-scheduler's shape), its digest is the
    `tessera_config_info` label and in `tessera.starting`, and `tessera_build_info` names the commit
    of the checkout it runs from."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    async with _running(clean_cluster, tmp_path, "obs-info") as (proc, _, lease):
        async with aiohttp.ClientSession(trust_env=False) as session:
            async with session.get(f"http://127.0.0.1:{proc.port}/configz") as response:
                assert response.status == 200, await response.text()
                served = (await response.json())["componentconfig"]
        metrics = await _metrics(proc.port)
        log = proc.log_path.read_text()
    [profile] = served["configuration"]["profiles"]  # config/binpack.yaml's strategy, resolved
    assert profile["pluginArgs"]["NodeResourcesFit"]["type"] == "RequestedToCapacityRatio"
    assert profile["pluginArgs"]["NodeResourcesFit"]["shape"][-1] == {"utilization": 100, "score": 100}
    # a plugin left at its defaults shows them, as kube-scheduler's /configz does
    assert profile["pluginArgs"]["TesseraDevices"]["agentHeartbeatTimeoutSeconds"] == 90
    assert served["configuration"]["leaderElection"]["resourceName"] == lease
    assert metrics[("tessera_config_info", (("digest", served["digest"]),))] == 1
    [build] = [labels for (name, labels) in metrics if name == "tessera_build_info"]
    assert dict(build)["git_commit"] == commit
    [starting] = [orjson.loads(line) for line in log.splitlines() if '"tessera.starting"' in line]
    assert starting["config_digest"] == served["digest"] and starting["git_commit"] == commit
    assert starting["apiserver_version"] == "v1.36.3"


async def test_writes_say_tessera_and_class_status_names_the_resource(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                                      namespace: str, tmp_path: Path) -> None:
    async with _running(clean_cluster, tmp_path, "obs") as (_, _, lease):
        await kubectl.create(CLASSES, b.resource_class("obs-default", match_labels={"model": "V100"}))
        await kubectl.create(CLASSES, b.resource_class("obs-named", match_labels={"model": "V100"},
                                                       resource_name="gpu.example.com/obs-named"))
        await kubectl.create(CLASSES, b.resource_class("obs-cores", match_labels={"model": "V100"},
                                                       sharing={"dimension": "cores", "unit": "1"}))
        await kubectl.create_pod(namespace, b.pod("too-big", limits={"nvidia.com/gpu": 5}))
        # a selector naming an attribute no ExtendedResource has (`modle`): valid, matches nothing
        await kubectl.create(CLASSES, b.resource_class("obs-typo", match_labels={"modle": "V100"}))
        # a devices annotation an admin wrote on a pending pod, hoping to choose its GPU
        chosen = '{"containers":{"main":{"nvidia.com/gpu":[{"device":"picked","id":"GPU-picked"}]}},"version":1}'
        await kubectl.create_pod(namespace, b.pod("chooser", limits={"nvidia.com/gpu": 1},
                                                  annotations={ann.DEVICES: chosen}))

        async def class_status(name: str) -> dict[str, Any] | None:
            obj = (await kubectl.call("GET", f"{CLASSES}/{name}")).json()
            return obj if (obj.get("status") or {}).get("resourceName") else None

        default = await eventually(lambda: class_status("obs-default"))
        named = await eventually(lambda: class_status("obs-named"))
        assert default["status"]["resourceName"] == "class.tessera.dev/obs-default"
        assert named["status"]["resourceName"] == "gpu.example.com/obs-named"
        assert default["status"]["matchingDevices"] == 2
        assert _managers(default, "status") == {"tessera"} and _managers(named, "status") == {"tessera"}
        cores = (await eventually(lambda: class_status("obs-cores")))["status"]
        assert [(c["type"], c["status"]) for c in cores["conditions"]] == [("Valid", "False")]
        assert cores["conditions"][0]["message"] == (
            'spec.sharing.dimension: Invalid value: "cores": none of the 2 matching devices has a cores capacity '
            "of at least one unit (1); their capacities: memory")

        async def class_warning() -> dict[str, Any] | None:  # in "default": the class is cluster-scoped
            return next((e for e in await kubectl.events("default") if e["reason"] == "InvalidResourceClass"
                         and e["regarding"]["name"] == "obs-cores"), None)

        warning = await eventually(class_warning)
        # kubectl describe finds an object's Events by regarding.uid
        cores_uid = (await kubectl.call("GET", f"{CLASSES}/obs-cores")).json()["metadata"]["uid"]
        assert warning["regarding"]["uid"] == cores_uid and warning["type"] == "Warning"

        async def warnings(reason: str, name: str, where: str) -> list[dict[str, Any]] | None:
            found = [e for e in await kubectl.events(where) if e["reason"] == reason and e["regarding"]["name"] == name]
            return found or None

        [typo] = await eventually(lambda: warnings("UnknownDeviceAttribute", "obs-typo", "default"))
        assert typo["type"] == "Warning" and typo["note"] == (
            'ResourceClass obs-typo matches no device (no device has the attribute "modle")')
        [ignored] = await eventually(lambda: warnings("DevicesAnnotationIgnored", "chooser", namespace))
        assert ignored["type"] == "Warning" and chosen in ignored["note"]
        async def chooser_bound() -> dict[str, Any] | None:
            pod = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/chooser")).json()
            return pod if pod["spec"].get("nodeName") else None

        bound = await eventually(chooser_bound)  # placed as Tessera chose: a plain count, no device named
        assert ann.decode_devices(bound["metadata"]["annotations"][ann.DEVICES]) == {}

        columns = await _printed(clean_cluster, CLASSES)  # what `kubectl get resourceclasses` shows
        assert columns["obs-default"]["ResourceName"] == "class.tessera.dev/obs-default"
        assert columns["obs-named"]["ResourceName"] == "gpu.example.com/obs-named"
        # a class whose selector needs an attribute no device has: valid (devices may come), but
        # not read as healthy beside DEVICES 0
        printed = {name: (row["Valid"], row["Reason"]) for name, row in columns.items() if name.startswith("obs-")}
        assert printed["obs-typo"] == ("True", "UnknownDeviceAttribute"), printed
        assert printed["obs-default"] == ("True", "Valid") and printed["obs-cores"] == ("False", "InvalidSpec"), printed

        async def unschedulable() -> dict[str, Any] | None:
            pod = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/too-big")).json()
            conditions = pod.get("status", {}).get("conditions") or []
            return pod if any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions) else None

        pod = await eventually(unschedulable)
        assert _managers(pod, "status") == {"tessera"}
        assert _managers(pod) == {"tessera-e2e"}  # the test created it

        async def tessera_events() -> list[dict[str, Any]]:
            return [e for e in await kubectl.events(namespace) if e.get("reportingController") == "tessera"]

        events = await eventually(tessera_events)
        assert all(_managers(event) == {"tessera"} for event in events)
        # told once each: the class's status writes (its own MODIFIED events) and the pod's binding
        # and status writes since did not repeat them (no second Event, no series)
        assert [e.get("series") for e in await warnings("UnknownDeviceAttribute", "obs-typo", "default") or []] == [None]
        assert [e.get("series") for e in await warnings("DevicesAnnotationIgnored", "chooser", namespace) or []] == [None]
        lease_obj = (await kubectl.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")).json()
        assert _managers(lease_obj) == {"tessera"}


async def test_every_series_the_dashboard_queries_is_served(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                            namespace: str, tmp_path: Path) -> None:
    """Every metric, label and label value in the dashboard's PromQL is in a live /metrics, once
    the scheduler has led, bound a pod to a GPU and found one that fits nowhere (histograms have
    series only after an observation, the per-model device series only once a device is known,
    the unschedulable pods by plugin only once a plugin rejected one)."""
    async with _running(clean_cluster, tmp_path, "dash") as (proc, nodes, prefix):
        try:
            await kubectl.create(CLASSES, b.resource_class(prefix, match_labels={"model": "V100"}))
            await kubectl.create_pod(namespace, b.pod("gpu", limits={f"class.tessera.dev/{prefix}": 1}))
            # more than a node has: it waits, rejected by a plugin (scheduler_unschedulable_pods)
            await kubectl.create_pod(namespace, b.pod("too-big", limits={f"class.tessera.dev/{prefix}": 3}))
            # a gang of two (scheduler-plugins labels): one pod group attempt once both are there
            gang = {"pod-group.scheduling.sigs.k8s.io/name": "pair", "pod-group.scheduling.sigs.k8s.io/min-available": "2"}
            for i in range(2):
                await kubectl.create_pod(namespace, b.pod(f"pair-{i}", labels=gang))

            async def bound_and_one_rejected() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                bound = await bound_nodes(kubectl, namespace)
                if bound.get("gpu") != nodes[0] or not (bound.get("pair-0") and bound.get("pair-1")):
                    return None
                scraped = await _metrics(proc.port)
                rejected = sum(v for (name, _), v in scraped.items() if name == "scheduler_unschedulable_pods")
                return scraped if rejected >= 1 else None

            metrics = await eventually(bound_and_one_rejected)
            served = await _metrics_text(proc.port)
        finally:
            await kubectl.call("DELETE", f"{CLASSES}/{prefix}", ok=(200, 404))
    samples: dashboard.Samples = {}
    for name, labels in metrics:
        samples.setdefault(name, []).append(dict(labels))
    assert dashboard.problems(dashboard.load(), samples) == []
    # the chart's alert rules (monitoring.prometheusRule), as helm renders them
    rules = find(helm_template(helm_binary(), {"monitoring": {"prometheusRule": {"enabled": True}}}),
                 "PrometheusRule", "tessera-scheduler")
    exprs = [rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"]]
    # every alert the template defines renders at the default two replicas (TesseraStandbyMissing included)
    defined = (REPO / "deploy/helm/tessera/templates/scheduler-prometheusrule.yaml").read_text().count("- alert: ")
    assert len(exprs) == defined == 17
    # TesseraConflictingScheduler's counter has no series until another install writes (no such
    # install here, no series, as client-go's slow-path counter): the scheduler declares it, and
    # the rule's labels are checked in tests/unit/test_grafana_dashboard.py against a written one
    conflicting = "tessera_conflicting_scheduler_writes_total"
    assert f"# TYPE {conflicting} counter" in served
    assert dashboard.problems_in([e for e in exprs if conflicting not in e], samples) == []
    assert metrics[("tessera_devices_by_model", (("model", "V100"), ("state", "whole")))] == 1
    # the gang's one cycle, as kube-scheduler's pod group metrics count it (its first member's
    # cycle before the second existed tried no group); no gang metric of Tessera's own beside it
    assert metrics[("scheduler_podgroup_schedule_attempts_total", (("profile", "tessera"), ("result", "scheduled")))] == 1
    assert metrics[("scheduler_podgroup_scheduling_algorithm_duration_seconds_count", ())] == 1
    assert not any(name.startswith("tessera_gang") for name, _ in metrics)
    # kube-scheduler's framework timings, from the real process: the bound pod's Filter and Bind,
    # the waiting one's PostFilter (preemption found nothing to evict)
    points = {(dict(labels)["extension_point"], dict(labels)["status"]) for name, labels in metrics
              if name == "scheduler_framework_extension_point_duration_seconds_count"}
    assert {("Filter", "Success"), ("Bind", "Success"), ("PostFilter", "Unschedulable")} <= points, points


async def test_a_class_on_the_devices_own_resource_name_is_refused_and_plain_pods_still_bind(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    async with _running(clean_cluster, tmp_path, "taken") as (_, names, _):
        await kubectl.create(CLASSES, b.resource_class("taken-any-gpu", match_labels={"model": "A100"},
                                                       resource_name="nvidia.com/gpu"))

        async def refused() -> dict[str, Any] | None:
            obj = (await kubectl.call("GET", f"{CLASSES}/taken-any-gpu")).json()
            conditions = (obj.get("status") or {}).get("conditions") or []
            return conditions[0] if conditions and conditions[0]["status"] == "False" else None

        valid = await eventually(refused)
        assert (valid["type"], valid["message"]) == ("Valid", (
            'spec.resourceName: Invalid value: "nvidia.com/gpu": ExtendedResources carry this resourceName as '
            "their own, so a plain request for it is a count of those devices; use a name of its own (without "
            "resourceName the class's is class.tessera.dev/taken-any-gpu)"))
        await kubectl.create_pod(namespace, b.pod("plain", limits={"nvidia.com/gpu": 1}))

        async def bound() -> dict[str, str] | None:
            nodes = await bound_nodes(kubectl, namespace)
            return nodes if nodes.get("plain") else None

        assert (await eventually(bound))["plain"] == names[0]
        pod = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/plain")).json()
        assert "tessera.dev/devices" not in (pod["metadata"].get("annotations") or {})  # a count, not a class's


async def _nodes_view(plane: LocalControlPlane) -> dict[str, Any]:
    """`kubectl tessera nodes -o json`, the real plugin against the same apiserver."""
    proc = await asyncio.create_subprocess_exec(str(PLUGIN), "nodes", "-o", "json", "--kubeconfig", str(plane.kubeconfig),
                                                cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    view: dict[str, Any] = orjson.loads(out)
    return view


async def test_the_device_metric_counts_what_kubectl_tessera_nodes_shows(clean_cluster: LocalControlPlane,
                                                                         kubectl: Kube, namespace: str,
                                                                         tmp_path: Path) -> None:
    """A new user's trial: with a node cordoned and a device patched `spec.unschedulable: true`,
    /metrics counted the cordoned node's GPUs free and the healthy cordoned device unhealthy, and
    had no series for a GPU two pods claim or a fenced node. Four nodes of 2 V100s: n0 cordoned;
    n1's GPU 0 cordoned by an admin; n2's GPU 0 bound to two pods at once; n3 fenced by a bound
    pod whose device annotation cannot be read. /metrics and `kubectl tessera nodes` must agree."""
    async with _running(clean_cluster, tmp_path, "agree", nodes=4) as (proc, nodes, prefix):
        try:
            await kubectl.create(CLASSES, b.resource_class(prefix, match_labels={"model": "V100"}))
            resource = f"class.tessera.dev/{prefix}"
            devices = sorted((d for d in (await kubectl.call("GET", ERS)).json()["items"]
                              if d["spec"]["nodeName"] in nodes), key=lambda d: (d["spec"]["nodeName"], d["metadata"]["name"]))
            by_node = {node: [d for d in devices if d["spec"]["nodeName"] == node] for node in nodes}
            await kubectl.call("PATCH", f"/api/v1/nodes/{nodes[0]}", {"spec": {"unschedulable": True}},
                               content_type=MERGE_PATCH)
            await kubectl.call("PATCH", f"{ERS}/{by_node[nodes[1]][0]['metadata']['name']}",
                               {"spec": {"unschedulable": True}}, content_type=MERGE_PATCH)
            claimed = by_node[nodes[2]][0]
            grant = ann.encode_devices({"main": {resource: (
                ann.DeviceGrant(claimed["spec"]["deviceID"], claimed["metadata"]["name"], None),)}})
            for name in ("first", "second"):  # both bound to one GPU: something outside one scheduler's ledger
                await kubectl.create_pod(namespace, b.pod(name, node_name=nodes[2], limits={resource: 1},
                                                          annotations={ann.DEVICES: grant, ann.PHASE: ann.PHASE_ALLOCATED}))
            await kubectl.create_pod(namespace, b.pod("unreadable", node_name=nodes[3], limits={resource: 1},
                                                      annotations={ann.DEVICES: "{not json", ann.PHASE: ann.PHASE_ALLOCATED}))
            expected = {"free": 2, "cordoned": 3, "conflict": 1, "fenced": 2}

            seen: list[dict[str, float]] = []

            async def settled() -> dict[str, float] | None:
                scraped = await _metrics(proc.port)
                seen.append({dict(labels)["state"]: v for (name, labels), v in scraped.items() if name == "tessera_devices"})
                return seen[-1] if {s: v for s, v in seen[-1].items() if v} == expected else None

            try:
                states = await eventually(settled)
            except AssertionError:
                raise AssertionError(f"tessera_devices never read {expected}; last scrape: {seen[-1:]}") from None
            view = await _nodes_view(clean_cluster)
        finally:
            await kubectl.call("DELETE", f"{CLASSES}/{prefix}", ok=(200, 404))
    assert set(states) == {"free", "whole", "slices", "counted", "gated", "conflict", "fenced", "unhealthy",
                           "cordoned", "ghost"}
    summary = view["summary"]
    assert summary["gpus"] == sum(states.values()) == 8
    assert summary["used"] == sum(states[s] for s in ("whole", "slices", "counted", "gated", "conflict"))
    assert summary["free"] == states["free"]
    assert summary["unavailable"] == sum(states[s] for s in ("fenced", "unhealthy", "cordoned", "ghost"))
    assert summary["conflicts"] == states["conflict"]
    shown = [(node["name"], gpu["state"]) for node in view["nodes"] for gpu in node["gpus"]]
    assert sorted(shown) == sorted([(nodes[0], "free"), (nodes[0], "free"), (nodes[1], "cordoned"), (nodes[1], "free"),
                                    (nodes[2], "conflict"), (nodes[2], "free"), (nodes[3], "fenced"), (nodes[3], "fenced")])


async def test_a_replica_that_takes_the_lease_records_it_and_serves_process_and_request_metrics(
        clean_cluster: LocalControlPlane, kubectl: Kube, tmp_path: Path) -> None:
    """An on-call trial: no `LeaderElection` Event on the Lease (client-go's "<identity> became
    leader"), no `process_*` series and no `rest_client_requests_total` beside kube-scheduler's
    names. The apiserver takes the Event (events.k8s.io/v1 validation), and the scrape has them."""
    async with _running(clean_cluster, tmp_path, "obs-lease") as (proc, _, lease):
        taken = (await kubectl.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}")).json()
        spec = taken["spec"]

        async def recorded() -> list[dict[str, Any]]:
            events = (await kubectl.call("GET", "/apis/events.k8s.io/v1/namespaces/default/events")).json()
            return [e for e in events["items"] if e.get("reason") == "LeaderElection"
                    and (e.get("regarding") or {}).get("name") == lease]

        [event] = await eventually(recorded, timeout=20)
        metrics = await _metrics(proc.port)
    assert event["note"] == f"{spec['holderIdentity']} became leader" and event["type"] == "Normal"
    assert event["regarding"]["kind"] == "Lease" and event["regarding"]["apiVersion"] == "coordination.k8s.io/v1"
    # the Lease's own uid, as client-go's LeaseLock.RecordEvent refers to its ObjectMeta:
    # `kubectl describe lease` lists the Events whose involved object has its uid
    assert event["regarding"]["uid"] == taken["metadata"]["uid"]
    names = {name for name, _ in metrics}
    assert {"process_start_time_seconds", "process_resident_memory_bytes", "process_cpu_seconds_total"} <= names
    host = clean_cluster.server.split("://", 1)[1]
    ok = [labels for name, labels in metrics if name == "rest_client_requests_total" and dict(labels)["code"] == "200"]
    assert ok and all(dict(labels)["host"] == host for labels in ok), ok
    assert {dict(labels)["method"] for labels in ok} >= {"GET", "PUT"}  # lists and watches; the Lease renewals
