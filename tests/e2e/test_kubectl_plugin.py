"""`kubectl tessera` against the real apiserver (issue 16): the installed `kubectl-tessera`
executable (what `kubectl tessera ...` runs) reads a cluster Tessera is scheduling and shows its
GPUs, explains pods, and replays the pending ones under another configuration."""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

from scheduler.core import annotations as ann
from scheduler.kube.controlplane import ApiError, LocalControlPlane
from scheduler.kubectl.cli import USER_AGENT
from scheduler.sim import builders as b
from tests.e2e import gpu_scenario
from tests.e2e.gpu_scenario import Scenario
from tests.e2e.live import REPO, FakeAgent, Kube, eventually
from tests.e2e.test_devices_annotation_edit_live import CLASS, _allocated, _name_the_other_gpu, _two_gpu_node
from tests.e2e.test_live_scheduling import CLASSES, ERS

PLUGIN = Path(sys.executable).parent / "kubectl-tessera"  # the package's console script


async def _plugin(plane: LocalControlPlane, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(PLUGIN), *args, "--kubeconfig", str(plane.kubeconfig), cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _ok(plane: LocalControlPlane, *args: str) -> str:
    status, out, err = await _plugin(plane, *args)
    assert status == 0, err
    return out


INSTALLED = "/api/v1/namespaces/tessera-system/configmaps/tessera-scheduler-config"


@pytest.fixture(scope="module", autouse=True)
def no_installed_configuration(control_plane: LocalControlPlane) -> Iterator[None]:
    """Without --config the plugin reads the installed scheduler's ConfigMap; test_deploy leaves
    deploy/'s on the session's plane. These tests dry-run with the built-in configuration (or
    their own ConfigMap): set deploy/'s aside and put it back afterwards."""
    admin = control_plane.admin
    try:
        kept: dict[str, Any] | None = admin.get(INSTALLED)
    except ApiError as err:
        if err.status != 404:
            raise
        kept = None
    if kept is not None:
        admin.delete(INSTALLED)
    try:
        yield
    finally:
        if kept is not None:
            kept["metadata"] = {key: kept["metadata"][key] for key in ("name", "namespace", "labels")
                                if key in kept["metadata"]}
            admin.request("POST", INSTALLED.rsplit("/", 1)[0], kept)


@pytest.fixture
async def scenario(tessera: Any, kubectl: Kube, namespace: str) -> Scenario:
    await tessera("config/binpack.yaml")
    await gpu_scenario.create_cluster(kubectl)
    return await gpu_scenario.create_workload(kubectl, namespace)


def _gpus(view: dict[str, Any], node: str) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = next(n for n in view["nodes"] if n["name"] == node)["gpus"]
    return gpus


async def test_nodes_shows_every_gpu_as_the_core_sees_it(clean_cluster: LocalControlPlane, scenario: Scenario) -> None:
    assert PLUGIN.exists(), "kubectl-tessera is not installed with the package (pyproject [project.scripts])"
    view = orjson.loads(await _ok(clean_cluster, "nodes", "-o", "json"))
    assert [n["name"] for n in view["nodes"]] == list(gpu_scenario.NODES)

    n0 = _gpus(view, "map-n0")
    assert sorted(g["state"] for g in n0) == ["free", "slices", "whole", "whole"]
    sliced = next(g for g in n0 if g["state"] == "slices")
    assert [(h["pod"], h["amount"]) for h in sliced["holders"]] == [(scenario.key("infer-a"), "8Gi"),
                                                                   (scenario.key("infer-b"), "12Gi")]
    assert (sliced["used"], sliced["fill"], sliced["model"]) == ("20Gi/32Gi", 0.625, "V100")
    assert {h["pod"] for g in n0 if g["state"] == "whole" for h in g["holders"]} == {scenario.key("train")}

    # a fresh core never saw ghostly's device: the annotation names it, no object does (a ghost)
    n1 = _gpus(view, "map-n1")
    assert [g["state"] for g in n1] == ["ghost", "counted", "cordoned", "unhealthy"]
    assert (n1[0]["device"], n1[0]["holders"][0]["pod"]) == (scenario.ghost, scenario.key("ghostly"))
    assert n1[1]["holders"][0]["pod"] == scenario.key("plain")

    n2 = next(n for n in view["nodes"] if n["name"] == "map-n2")
    # alloc-2's GPU is the one the leader assumed it on at the allocation gate: gated, not free
    assert sorted(g["state"] for g in n2["gpus"]) == ["free", "free", "gated", "whole"]
    assert sorted((h["pod"], h["status"]) for g in n2["gpus"] for h in g["holders"]) == [
        (scenario.key("alloc-1"), "allocating"), (scenario.key("alloc-2"), "held")]
    assert f"{scenario.key('alloc-2')} waits for the allocation gate" in n2["notes"]

    pending = {p["pod"]: p for p in view["pending"]}
    assert set(pending) == {scenario.key(p) for p in ("alloc-2", "too-big", "wave-0", "wave-1")}
    assert (pending[scenario.key("alloc-2")]["reason"], pending[scenario.key("alloc-2")]["node"]) == \
        ("WaitingForAllocation", "map-n2")
    assert "3 Insufficient nvidia.com/gpu" in pending[scenario.key("too-big")]["message"]
    assert [(g["gang"], g["minimum"], g["members"]) for g in view["gangs"]] == [(scenario.key("wave"), 3, 2)]
    assert {k: view["summary"][k] for k in ("gpus", "used", "shared", "free", "unavailable")} == \
        {"gpus": 12, "used": 6, "shared": 1, "free": 3, "unavailable": 3}

    table = await _ok(clean_cluster, "nodes")
    assert table.splitlines()[0].split() == ["NODE", "GPU", "MODEL", "MEMORY", "STATE", "USE", "PODS", "REASON"]
    assert table.rstrip().endswith("most free on one node: 2, map-n2")
    as_yaml = yaml.safe_load(await _ok(clean_cluster, "nodes", "-o", "yaml"))
    # the same document, read a moment later (Tessera may have written a gang member's reason since)
    assert (as_yaml["nodes"], as_yaml["summary"]) == (view["nodes"], view["summary"])


async def test_explain_says_why_a_pod_waits_or_where_it_went(clean_cluster: LocalControlPlane,
                                                             scenario: Scenario) -> None:
    text = await _ok(clean_cluster, "explain", "too-big", "-n", scenario.namespace)
    assert "Status:     pending: Unschedulable" in text
    assert "0/3 nodes are available: 3 Insufficient nvidia.com/gpu." in text
    for node in gpu_scenario.NODES:  # the dry run's per-node reason
        assert f"  {node}   Insufficient nvidia.com/gpu" in text
    assert "FailedScheduling" in text and "tessera" in text  # its Event

    bound = orjson.loads(await _ok(clean_cluster, "explain", f"{scenario.namespace}/infer-a", "-o", "json"))
    assert (bound["node"], bound["status"], bound["dry_run"]) == ("map-n0", "bound to map-n0", None)
    assert [(d["resource"], d["amount"]) for d in bound["devices"]] == [(gpu_scenario.SHARED, "8Gi")]
    assert any(e["reason"] == "Scheduled" for e in bound["events"])

    held = yaml.safe_load(await _ok(clean_cluster, "explain", "alloc-2", "-n", scenario.namespace, "-o", "yaml"))
    assert held["reason"] == "WaitingForAllocation" and held["gate"].startswith("waits for the allocation gate of map-n2")
    assert (held["dry_run"]["node"], held["dry_run"]["held"]) == ("map-n2", True)
    holder = orjson.loads(await _ok(clean_cluster, "explain", "alloc-1", "-n", scenario.namespace, "-o", "json"))
    assert holder["gate"].startswith("holds the allocation gate on map-n2")

    gang = orjson.loads(await _ok(clean_cluster, "explain", "wave-0", "-n", scenario.namespace, "-o", "json"))
    assert (gang["gang"]["gang"], gang["gang"]["minimum"], gang["gang"]["members"]) == (scenario.key("wave"), 3, 2)
    assert "cannot find enough sibling pods" in gang["dry_run"]["message"]
    assert gang["too_few_members"].startswith("Only 2 pods of gang ") and " is 3: no member is tried until 1 more" \
        in gang["too_few_members"], gang["too_few_members"]

    status, _, err = await _plugin(clean_cluster, "explain", "nope", "-n", scenario.namespace)
    assert (status, err) == (1, f'error: pods "nope" not found in namespace "{scenario.namespace}"\n')


async def test_explain_takes_a_workloads_type_and_name(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                       namespace: str) -> None:
    """A trial: `explain job/ft8` and `explain deploy/infer` read `pods "ft8" not found` (job/ was
    taken for a namespace). A Job's pods are the ones its selector matches (no controller runs
    here: the test makes them); its first pending one is explained, the others named on stderr."""
    template = {"metadata": {"labels": {"app": "ft8"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]}}
    await kubectl.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ft8", "namespace": namespace},
        "spec": {"manualSelector": True, "selector": {"matchLabels": {"app": "ft8"}}, "template": template}})
    for name, labels, node in (("ft8-0", {"app": "ft8"}, "gone-node"), ("ft8-1", {"app": "ft8"}, ""),
                               ("ft8-2", {"app": "ft8"}, ""), ("other", {"app": "else"}, "")):
        pod = b.pod(name, namespace, labels=labels, limits={"nvidia.com/gpu": 1}, node_name=node)
        del pod["metadata"]["uid"], pod["status"]
        await kubectl.create_pod(namespace, pod)
    status, out, err = await _plugin(clean_cluster, "explain", "job/ft8", "-n", namespace, "-o", "json")
    assert status == 0, err
    assert orjson.loads(out)["pod"] == f"{namespace}/ft8-1"
    assert err == "job/ft8: 2 of its 3 pods pending; explaining ft8-1; also pending: ft8-2\n"
    status, out, err = await _plugin(clean_cluster, "explain", "jobs.batch/ft8", "-n", namespace)
    assert status == 0 and f"{namespace}/ft8-1" in out, err

    status, _, err = await _plugin(clean_cluster, "explain", "deploy/infer", "-n", namespace)
    assert (status, err) == (1, f'error: deployments.apps "infer" not found in namespace "{namespace}"\n')
    status, _, err = await _plugin(clean_cluster, "explain", "svc/infer")
    assert status == 1 and err.startswith('error: pods "infer" not found in namespace "svc" (\'svc\' was read as '
                                          "a namespace; the argument is a pod (NAME, pod/NAME or NAMESPACE/NAME), "
                                          "a workload"), err
    # a namespace that exists was read as what it is: kubectl's words alone (a trial's
    # `explain kube-system/x` read the hint, as if kube-system were no namespace)
    status, _, err = await _plugin(clean_cluster, "explain", "kube-system/x")
    assert (status, err) == (1, 'error: pods "x" not found in namespace "kube-system"\n')
    status, _, err = await _plugin(clean_cluster, "explain", f"{namespace}/x")
    assert (status, err) == (1, f'error: pods "x" not found in namespace "{namespace}"\n')


async def test_explain_takes_a_podgroup(clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str) -> None:
    """A Kubeflow user's trial: `explain pg/pt` read `pods "pt" not found in namespace "pg"`. The
    PodGroup's gang is explained: its minimum, its members, how many are missing and why it waits."""
    await kubectl.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
                         b.podgroup("pt", 3, namespace))
    for name in ("pt-master-0", "pt-worker-0"):
        pod = b.pod(name, namespace, labels={"scheduling.x-k8s.io/pod-group": "pt"}, limits={"nvidia.com/gpu": 1})
        del pod["metadata"]["uid"], pod["status"]
        await kubectl.create_pod(namespace, pod)
    for ref in ("pg/pt", "podgroups.scheduling.x-k8s.io/pt"):
        status, out, err = await _plugin(clean_cluster, "explain", ref, "-n", namespace)
        assert (status, err) == (0, ""), err
        assert f"PodGroup:      {namespace}/pt (scheduling.x-k8s.io/v1alpha1)" in out
        assert "Members:       2 exist, 1 missing (minMember 3); 0 placed, 2 waiting" in out
        assert f"Only 2 pods of PodGroup {namespace}/pt exist and its minMember is 3" in out
    doc = orjson.loads(await _ok(clean_cluster, "explain", "pg/pt", "-n", namespace, "-o", "json"))
    assert [m["pod"] for m in doc["members"]] == ["pt-master-0", "pt-worker-0"] and doc["missing"] == 1
    status, _, err = await _plugin(clean_cluster, "explain", "pg/tp", "-n", namespace)
    assert (status, err) == (1, f'error: podgroups.scheduling.x-k8s.io "tp" not found in namespace "{namespace}" '
                                "(nor podgroups.scheduling.k8s.io)\n")


async def test_what_if_replays_the_pending_pods_and_writes_nothing(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                                  scenario: Scenario) -> None:
    result = orjson.loads(await _ok(clean_cluster, "what-if", "--config", "config/spread.yaml",
                                    "-n", scenario.namespace, "-o", "json"))
    outcomes = {o["pod"]: o for o in result["outcomes"]}
    assert set(outcomes) == {scenario.key(p) for p in ("alloc-2", "too-big", "wave-0", "wave-1")}
    assert outcomes[scenario.key("too-big")]["node"] == ""
    assert (outcomes[scenario.key("alloc-2")]["node"], outcomes[scenario.key("alloc-2")]["held"]) == ("map-n2", True)
    assert result["config"] == "config/spread.yaml" and result["placed"] == 1
    text = await _ok(clean_cluster, "what-if", "--config", "config/spread.yaml")
    assert "4 pending pods: 1 would be placed, 3 would stay pending" in text
    # every write names its field manager after the client's user agent: none is the plugin's
    # (Tessera itself keeps writing meanwhile, so resourceVersions prove nothing)
    for path in (f"/api/v1/namespaces/{scenario.namespace}/pods", "/api/v1/nodes", ERS,
                 CLASSES, f"/apis/events.k8s.io/v1/namespaces/{scenario.namespace}/events"):
        for obj in (await kubectl.call("GET", path)).json()["items"]:
            managers = {entry["manager"] for entry in obj["metadata"].get("managedFields") or ()}
            assert USER_AGENT not in managers, (path, obj["metadata"]["name"], managers)


async def test_what_if_from_a_file_places_pods_that_are_not_created(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                                     namespace: str, tmp_path: Path) -> None:
    """A day-2 trial: "would an 8-GPU job fit?" needed the job to be created. `-f` answers from a file.
    A capacity planner's trial: "what if I add a node of another model and take this one away?" —
    a file's Node is capacity added, --without-nodes takes the nodes its selector matches away
    (the real apiserver parses it), and the pods bound there are placed again; nothing is written."""
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 8, "A100", prefix="probe",
                                    labels={"rack": namespace})
    try:
        probe = tmp_path / "probe.yaml"
        probe.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: probe8, namespace: {namespace}}}\n"
                         "spec:\n  schedulerName: tessera\n  nodeSelector: {kubernetes.io/hostname: " + names[0] + "}\n"
                         "  containers:\n  - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 8}}}\n")
        result = orjson.loads(await _ok(clean_cluster, "what-if", "-f", str(probe), "-n", namespace, "-o", "json"))
        assert [(o["pod"], o["node"]) for o in result["outcomes"]] == [(f"{namespace}/probe8", names[0])]
        pods = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods")).json()["items"]
        assert pods == []  # nothing was created

        # a pod bound to the A100 node, which only nodes of this rack take; an H100 node of the rack added
        await kubectl.create_pod(namespace, b.pod("running4", limits={"nvidia.com/gpu": 4}, node_name=names[0],
                                                  spec_extra={"nodeSelector": {"rack": namespace}}))
        h100 = b.node(f"{names[0]}-h100", gpus=8, labels={"rack": namespace, "nvidia.com/gpu.product": "H100"})
        (tmp_path / "h100.yaml").write_text(yaml.safe_dump(h100))
        args = ("what-if", "-f", str(tmp_path / "h100.yaml"), "--without-nodes", f"kubernetes.io/hostname={names[0]}",
                "-n", namespace)
        result = orjson.loads(await _ok(clean_cluster, *args, "-o", "json"))
        assert [(o["pod"], o["node"], o["was_on"]) for o in result["outcomes"]] == [
            (f"{namespace}/running4", h100["metadata"]["name"], names[0])]
        assert (result["added_nodes"], result["removed_nodes"]) == ([h100["metadata"]["name"]], names)
        text = await _ok(clean_cluster, *args)
        assert (f"Removed: 1 node (not deleted; --without-nodes kubernetes.io/hostname={names[0]}): {names[0]}; "
                "their 1 pod replayed as pending (RESULT says which node each was on): 1 would be placed") in text
        status, _, err = await _plugin(clean_cluster, "what-if", "--without-nodes", "rack in (", "-n", namespace)
        assert status != 0 and "--without-nodes rack in (: HTTP 400: " in err, err
        nodes = [node["metadata"]["name"] for node in (await kubectl.call("GET", "/api/v1/nodes")).json()["items"]]
        assert names[0] in nodes and h100["metadata"]["name"] not in nodes  # nothing created, nothing deleted
        [pod] = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods")).json()["items"]
        assert pod["spec"]["nodeName"] == names[0]
    finally:
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)


async def test_explain_and_what_if_say_what_of_a_pods_claims_is_checked(clean_cluster: LocalControlPlane,
                                                                        kubectl: Kube, namespace: str,
                                                                        tmp_path: Path) -> None:
    """A new user's trial: a pod with a WaitForFirstConsumer claim was bound in silence (the claim
    stayed Pending, the pod ContainerCreating). explain and what-if say what VolumeBinding checks and
    what it does not; what-if -f takes the app's bundle whole (its StorageClass, a provisioner's so
    that the claim can be provisioned on the node, and its claim join the dry run) and -f more than
    once."""
    storage_class = f"wffc-{namespace}"
    await kubectl.create("/apis/storage.k8s.io/v1/storageclasses", {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": storage_class},
        "provisioner": "example.com/fake", "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        await kubectl.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": namespace},
            "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}})
        pod = b.pod("pvc-pod", namespace, limits={"nvidia.com/gpu": 1})
        pod["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
        del pod["metadata"]["uid"], pod["status"]
        await kubectl.create_pod(namespace, pod)
        out = await _ok(clean_cluster, "explain", "pvc-pod", "-n", namespace)
        volumes = next(line for line in out.splitlines() if line.startswith("Volumes:"))
        assert ("claim data: Tessera checks that the claims exist and are bound and that a bound volume's node "
                "affinity allows the node (VolumeBinding), and gives a claim of a WaitForFirstConsumer StorageClass a "
                "free volume on the node or has it provisioned there") in volumes, out
        assert "docs/not-supported.md (Volumes)" in volumes

        bundle, probe = tmp_path / "bundle.yaml", tmp_path / "probe.yaml"
        bundle.write_text(f"apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {storage_class}}}\n"
                          "provisioner: example.com/fake\nvolumeBindingMode: WaitForFirstConsumer\n---\n"
                          "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: more}\n"
                          f"spec: {{storageClassName: {storage_class}, accessModes: [ReadWriteOnce], "
                          "resources: {requests: {storage: 1Gi}}}\n")
        probe.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: probe}\nspec:\n  schedulerName: tessera\n"
                         "  volumes: [{name: d, persistentVolumeClaim: {claimName: more}}]\n"
                         "  containers: [{name: c, image: x}]\n")
        status, out, err = await _plugin(clean_cluster, "what-if", "-f", str(bundle), "-f", str(probe), "-n", namespace)
        assert status == 0, err
        assert "skipped" not in err, err  # the bundle's StorageClass and claim join the dry run
        # its claim waits for its first consumer (the cluster has no node: that alone keeps it pending)
        [line] = [line for line in out.splitlines() if line.startswith(f"{namespace}/probe ")]
        assert line.endswith("no nodes available to schedule pods"), out
        assert f"Not read: {namespace}/probe: claim more: Tessera checks that the claims exist" in out, out
        assert (await kubectl.pods(namespace)).keys() == {"pvc-pod"}  # nothing was created

        # a later trial: the claims the controllers make were not made. A StatefulSet's template
        # claim `d-st-0` exists (used as is, no name clash), `d-st-1` is made; a Job's ephemeral
        # volume's claim is made, controlled by its pod (it waited for the ephemeral volume
        # controller); a set whose claims find no volume (no provisioner) waits for one
        def claim(name: str, klass: str) -> dict[str, Any]:
            return {"metadata": {"name": name}, "spec": {"storageClassName": klass, "accessModes": ["ReadWriteOnce"],
                                                         "resources": {"requests": {"storage": "1Gi"}}}}

        await kubectl.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim("d-st-0", storage_class),
            "metadata": {"name": "d-st-0", "namespace": namespace}})
        local = f"local-{namespace}"
        docs: list[dict[str, Any]] = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                       "metadata": {"name": local}, "provisioner": "kubernetes.io/no-provisioner",
                                       "volumeBindingMode": "WaitForFirstConsumer"}]
        docs += [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"schedulerName": "tessera", "containers": [{"name": "c", "image": "x"}]}},
            "volumeClaimTemplates": [claim("d", klass)]}} for name, klass in (("st", storage_class), ("lt", local))]
        docs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ej"}, "spec": {"template": {"spec": {
            "schedulerName": "tessera", "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}],
            "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                "spec": claim("", storage_class)["spec"]}}}]}}}})
        workloads = tmp_path / "workloads.yaml"
        workloads.write_text(yaml.safe_dump_all(docs))
        nodes = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 8, "A100", prefix="vol")
        try:
            status, out, err = await _plugin(clean_cluster, "what-if", "-f", str(workloads), "-n", namespace,
                                             "-o", "json")
        finally:
            await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, nodes)
        assert status == 0, err
        found = {o["pod"].split("/")[1]: o for o in orjson.loads(out)["outcomes"]}
        assert all(found[pod]["node"] for pod in ("st-0", "st-1", "ej-0")), found
        assert not found["lt-0"]["node"] and "didn't find available persistent volumes to bind" in \
            found["lt-0"]["message"], found
        claims = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")).json()["items"]
        assert sorted(c["metadata"]["name"] for c in claims) == ["d-st-0", "data"]  # nothing was created
    finally:
        await kubectl.call("DELETE", f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")


async def test_kubectl_flags_and_errors(clean_cluster: LocalControlPlane, tmp_path: Path) -> None:
    context = yaml.safe_load(clean_cluster.kubeconfig.read_text())["current-context"]
    assert (await _plugin(clean_cluster, "--context", context, "nodes"))[0] == 0
    status, _, err = await _plugin(clean_cluster, "nodes", "--context", "no-such-context")
    # kubectl's own line for `kubectl --context no-such-context get nodes` (a50d742)
    assert (status, err) == (2, "Error in configuration: context was not found for specified context: no-such-context\n")
    status, _, err = await _plugin(clean_cluster, "what-if", "--config", str(tmp_path / "missing.yaml"))
    assert (status, err) == (2, f"error: invalid configuration: {tmp_path / 'missing.yaml'}: no such file\n")


async def test_explain_dry_runs_with_the_installed_configuration(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                                 scenario: Scenario) -> None:
    """deploy/ and the chart mount ConfigMap tessera-scheduler-config as the scheduler's
    configuration; without --config, `explain` and `nodes` use it (the built-in profile would
    explain decisions the installed scheduler does not make), and say when they cannot."""
    namespace, config_map = "tessera-system", INSTALLED
    text = (REPO / "config" / "binpack.yaml").read_text().replace("schedulerName: tessera", "schedulerName: gpu-batch")
    await kubectl.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": namespace}}, ok=(201, 409))
    await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tessera-scheduler-config"},
                        "data": {"config.yaml": text}})
    try:
        out = await _ok(clean_cluster, "explain", "too-big", "-n", scenario.namespace)
        # the installed profile is gpu-batch: the pod names tessera, which it does not schedule
        assert "Scheduler:  tessera (not a Tessera profile)" in out
        explained = orjson.loads(await _ok(clean_cluster, "explain", "too-big", "-n", scenario.namespace, "-o", "json"))
        assert explained["config"] == f"{namespace}/tessera-scheduler-config"
        view = orjson.loads(await _ok(clean_cluster, "nodes", "-o", "json"))
        assert not [p for p in view["pending"] if p["pod"].startswith(f"{scenario.namespace}/")]  # none is its
        # --config wins; another namespace without the ConfigMap: the built-in one, quietly
        out = await _ok(clean_cluster, "explain", "too-big", "-n", scenario.namespace, "--config", "config/binpack.yaml")
        assert "Dry run through the core with the configuration config/binpack.yaml, now" in out
        status, out, err = await _plugin(clean_cluster, "explain", "too-big", "-n", scenario.namespace,
                                         "--scheduler-namespace", "elsewhere")
        assert (status, err) == (0, "")
        assert "Dry run through the core with the built-in configuration, now" in out
        await kubectl.call("PUT", config_map, {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "tessera-scheduler-config"},
                                               "data": {"config.yaml": "profiles: 3\n"}})
        status, out, err = await _plugin(clean_cluster, "explain", "too-big", "-n", scenario.namespace)
        assert status == 0 and err.startswith(f"warning: invalid configuration: {namespace}/tessera-scheduler-config: ")
        assert err.endswith("; the dry run uses the built-in configuration (give --config FILE for another)\n")
        assert "Dry run through the core with the built-in configuration, now" in out
    finally:
        await kubectl.call("DELETE", config_map, ok=(200, 404))


async def test_explain_says_whether_a_replica_leads(clean_cluster: LocalControlPlane, kubectl: Kube,
                                                   scenario: Scenario) -> None:
    """A new user's trial: after SIGKILL of the leader, explain said "pending: not tried yet" and
    nothing about the Lease. The built-in configuration's Lease (kube-system/tessera) names a
    holder that stopped renewing, then one that renews while explain runs."""
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"

    def record(holder: str, ago: float) -> dict[str, Any]:
        stamp = (datetime.now(timezone.utc) - timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": stamp, "renewTime": stamp,
                "leaseTransitions": 1}

    await kubectl.call("POST", leases, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "tessera"}, "spec": record("tessera-killed", 5)})
    stop = asyncio.Event()

    async def renew() -> None:
        while not stop.is_set():
            lease = (await kubectl.call("GET", f"{leases}/tessera")).json()
            lease["spec"] = record("tessera-live", 0)
            await kubectl.call("PUT", f"{leases}/tessera", lease, ok=(200, 409))
            await asyncio.sleep(0.5)

    try:
        status, out, err = await _plugin(clean_cluster, "explain", "too-big", "-n", scenario.namespace)
        assert status == 0, err
        assert ("Leader:     none: no Tessera replica is scheduling. The Lease kube-system/tessera was last "
                "renewed by tessera-killed about ") in out
        assert "watching the Lease kube-system/tessera for up to 4 s" in err
        renewing = asyncio.create_task(renew())
        try:
            out = await _ok(clean_cluster, "explain", "too-big", "-n", scenario.namespace)
        finally:
            stop.set()
            await renewing
        assert "Leader:     tessera-live (" in out
        bound = await _ok(clean_cluster, "explain", f"{scenario.namespace}/infer-a")  # not waiting: not asked
        assert "Leader:" not in bound
    finally:
        await kubectl.call("DELETE", f"{leases}/tessera", ok=(200, 404))


async def test_explain_reads_a_fence_refusal_against_the_term_leading_now(clean_cluster: LocalControlPlane,
                                                                         kubectl: Kube, namespace: str) -> None:
    """A pending pod whose latest FailedScheduling is a leader's refused term fence: explain says
    the fence holds it while the pod carries an older term's token (here the same replica's
    earlier term, which explain used to read as fenced), and "not tried yet" once it carries the
    token of the term the Lease holds now — the Lease read from the apiserver as the leader
    forms its token (acquireTime as the apiserver returns it), whatever the clocks."""
    from scheduler.core.annotations import TERM
    from scheduler.kube.fence import FENCE_REFUSED
    from scheduler.kube.term_token import term_token

    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await kubectl.call("POST", leases, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "tessera"},
                                        "spec": {"holderIdentity": "replica-b", "leaseDurationSeconds": 15,
                                                 "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 4}})
    try:
        acquired = (await kubectl.call("GET", f"{leases}/tessera")).json()["spec"]["acquireTime"]
        current = term_token("kube-system", "tessera", "replica-b", 4, acquired)
        older = term_token("kube-system", "tessera", "replica-b", 2, "2026-01-01T00:00:00.000000Z")
        pod = await kubectl.create_pod(namespace, b.pod("waits", limits={"nvidia.com/gpu": 1},
                                                        annotations={TERM: older}))
        later = (datetime.now(timezone.utc) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        await kubectl.call("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", {
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "waits.fence"},
            "eventTime": later,  # a clock ahead of the Lease's: the times do not decide
            "reportingController": "tessera", "reportingInstance": "replica-b", "action": "Scheduling",
            "reason": "FailedScheduling", "type": "Warning",
            "note": f"{FENCE_REFUSED}: writing tessera.dev/term through pods/status failed: HTTP 403: denied",
            "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "waits",
                          "uid": pod["metadata"]["uid"]}})
        out = await _ok(clean_cluster, "explain", "waits", "-n", namespace)
        assert "Status:     pending, not tried: the leader's term fence could not be written onto it" in out, out
        assert "Leader:     " in out
        await kubectl.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/waits",
                           {"metadata": {"annotations": {TERM: current}}},
                           content_type="application/merge-patch+json")
        out = await _ok(clean_cluster, "explain", "waits", "-n", namespace)
        assert "Status:     pending: not tried yet\n" in out, out
        # no Lease: no current term to judge the refusal by, said so rather than shown as current
        await kubectl.call("DELETE", f"{leases}/tessera")
        out = await _ok(clean_cluster, "explain", "waits", "-n", namespace)
        assert ("Status:     pending: a leader's term fence could not be written onto it earlier (FailedScheduling "
                "in Events); whether it still holds the pod is unknown: no replica holds the Lease") in out, out
    finally:
        await kubectl.call("DELETE", f"{leases}/tessera", ok=(200, 404))


async def test_nodes_says_a_node_agent_went_silent(clean_cluster: LocalControlPlane, kubectl: Kube) -> None:
    """An on-call trial: a SIGKILLed node agent left its ExtendedResources Healthy=True with a
    heartbeat five minutes old, and `kubectl tessera nodes` said nothing. Its GPU rows read
    `node agent silent 5m…` and the node's note says what that means; a node whose agent heartbeats
    now, and one no agent serves, read nothing of the kind."""
    from tests.e2e.test_live_scheduling import _create_nodes

    await _create_nodes(kubectl, None, [b.node(name, gpus=2) for name in ("killed", "alive", "no-agent")])
    now = datetime.now(timezone.utc)
    beats = {"killed": now - timedelta(seconds=300), "alive": now}
    for node in ("killed", "alive", "no-agent"):
        for index in range(2):
            name = (await kubectl.create(ERS, b.device(node, index)))["metadata"]["name"]
            if node in beats:
                await kubectl.call("PATCH", f"{ERS}/{name}/status",
                                   {"status": {"lastHeartbeatTime": beats[node].strftime("%Y-%m-%dT%H:%M:%SZ")}},
                                   content_type="application/merge-patch+json")
    table = await _ok(clean_cluster, "nodes")
    rows = [line.split() for line in table.split("\n\n")[0].splitlines()[1:]]
    node = ""
    reasons: dict[str, list[str]] = {}
    for row in rows:
        if not row[0].isdigit():
            node, row = row[0], row[1:]
        reasons.setdefault(node, []).append(" ".join(row[6:]))
    assert len(reasons["killed"]) == 2 and all(r.startswith("node agent silent 5m") for r in reasons["killed"]), table
    assert reasons["alive"] == ["-"] * 2 and reasons["no-agent"] == ["-"] * 2, table
    assert "killed: node agent silent: its last heartbeat" in table and "agentHeartbeatTimeoutSeconds 90" in table
    view = orjson.loads(await _ok(clean_cluster, "nodes", "-o", "json"))
    silent = {n["name"]: n["agent_silent_for"] for n in view["nodes"]}
    assert silent["alive"] is None and silent["no-agent"] is None and 300 <= silent["killed"] < 360, silent


async def test_rollback_check_lists_a_pod_whose_edit_dropped_a_held_gpu(clean_cluster: LocalControlPlane,
                                                                        tessera: Any, kubectl: Kube,
                                                                        namespace: str) -> None:
    """An SRE upgrade trial: rolled back to a version from before `tessera.dev/held-devices`, a
    bound pod's edited `tessera.dev/devices` let it give the GPU the pod still used to a second
    pod. `rollback-check` reads the pods as Tessera left them: safe (exit 0) while the Binding's
    record and the annotation agree; after the edit (Tessera writes the union into held-devices)
    the pod and the GPU an older version would give away are listed, exit 1."""
    await tessera("config/binpack.yaml")
    devices = await _two_gpu_node(kubectl, "rollback-1")
    async with FakeAgent(kubectl, namespace):
        await kubectl.create_pod(namespace, b.pod("cls1", limits={CLASS: 1}))
        pod = await _allocated(kubectl, namespace, "cls1")
        assert (await _ok(clean_cluster, "rollback-check")).startswith("safe to roll back")
        given = orjson.loads(pod["metadata"]["annotations"][ann.DEVICES])["containers"]["main"][CLASS][0]["device"]
        await _name_the_other_gpu(kubectl, namespace, pod, devices)

        async def union_recorded() -> bool:
            got = await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/pods/cls1")
            return len(orjson.loads(got.json()["metadata"]["annotations"][ann.HELD_DEVICES])
                       ["containers"]["main"][CLASS]) == 2

        await eventually(union_recorded)
        status, out, err = await _plugin(clean_cluster, "rollback-check")
        assert (status, err) == (1, ""), err
        assert f"{namespace}/cls1   rollback-1   {given}\n" in out, out
        assert out.endswith("1 pod holds devices an older version cannot see (it reads tessera.dev/devices alone and "
                            "would give them to another pod): not safe to roll back to a build without "
                            "tessera.dev/held-devices (before 6ba0c29) until they end; a build from 6ba0c29 on "
                            "reads both, and this check does not apply to it\n"), out
        status, out, _ = await _plugin(clean_cluster, "rollback-check", "-o", "json")
        assert status == 1 and orjson.loads(out)["pods"] == [
            {"pod": f"{namespace}/cls1", "node": "rollback-1", "unseenDevices": [given]}]
