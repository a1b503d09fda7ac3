"""`kubectl tessera what-if -f` with workloads, against the real apiserver: the installed
`kubectl-tessera` reads a file of a gang StatefulSet (with its PodGroup) and a Deployment, as a
platform user writes them, and places the pods their controllers would create — creating nothing
(tests/unit/test_whatif_workloads.py has the cases; here the cluster is listed for real). Also the
file's pods a real ResourceQuota refuses, in the words of the apiserver's own dry run, and the
requests and limits a real LimitRange gives them, as the apiserver's own dry run stores them."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import yaml

from scheduler.api.quantity import parse_quantity
from scheduler.kube.controlplane import LocalControlPlane
from scheduler.kubectl import limitrange
from scheduler.sim import builders as b
from tests.e2e.live import Kube, eventually
from tests.e2e.test_kubectl_plugin import _ok, _plugin


def _workload(kind: str, name: str, replicas: int, gpus: int, labels: str, node_label: str) -> str:
    return (f"apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n"
            f"  selector: {{matchLabels: {{app: {name}}}}}\n"
            f"  template:\n    metadata: {{labels: {{app: {name}{labels}}}}}\n    spec:\n      schedulerName: tessera\n"
            f"      nodeSelector: {{tessera.dev/e2e-what-if: {node_label}}}\n"
            f"      containers:\n      - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}\n")


async def test_what_if_places_the_pods_of_workloads_without_creating_them(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    # two 4-GPU nodes only these pods may use (the nodeSelector): pending pods of other tests stay off them
    label = namespace
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 2, 4, "A100", prefix="wl",
                                    labels={"tessera.dev/e2e-what-if": label})
    try:
        group = ("apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: train}\n"
                 "spec: {minMember: 3}\n")
        gang = _workload("StatefulSet", "train", 3, 4, ", scheduling.x-k8s.io/pod-group: train", label)
        file = tmp_path / "workloads.yaml"
        file.write_text(f"{group}---\n{gang}")
        status, out, err = await _plugin(clean_cluster, "what-if", "--config", "config/binpack.yaml", "-f", str(file),
                                         "-n", namespace, "-o", "json")
        assert status == 0, err
        result = orjson.loads(out)
        # the default podManagementPolicy would never create the gang's second pod: warned on stderr
        assert (f"warning: {file}: object 2: StatefulSet {namespace}/train: its pods are one gang (PodGroup "
                f"{namespace}/train) and its podManagementPolicy is OrderedReady") in err, err
        # three 4-GPU members, room for two: the gang is judged whole, none placed
        assert [(o["pod"], o["node"]) for o in result["outcomes"]] == [
            (f"{namespace}/train-{i}", "") for i in range(3)]
        assert all(f"pod group {namespace}/train: only 2 of the 3 members it needs fit" in o["message"]
                   for o in result["outcomes"]), result["outcomes"]

        # two replicas of a Deployment fit, one per node
        file.write_text(_workload("Deployment", "serve", 2, 4, "", label))
        result = orjson.loads(await _ok(clean_cluster, "what-if", "--config", "config/binpack.yaml", "-f", str(file),
                                        "-n", namespace, "-o", "json"))
        assert [o["pod"] for o in result["outcomes"]] == [f"{namespace}/serve-what-if-{i}" for i in range(2)]
        assert sorted(o["node"] for o in result["outcomes"]) == sorted(names), result["outcomes"]

        # a kind it does not take: an error naming those it takes
        file.write_text("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n")
        status, _, err = await _plugin(clean_cluster, "what-if", "--config", "config/binpack.yaml", "-f", str(file),
                                       "-n", namespace)
        assert (status, err) == (2, f"error: {file}: object 1 is a DaemonSet: what-if -f takes Pods, Deployments, "
                                    "ReplicaSets, StatefulSets, Jobs, Kubeflow training jobs (kubeflow.org/v1 PyTorchJob, TFJob, "
                                    "XGBoostJob, PaddleJob, JAXJob), Nodes and tessera.dev ExtendedResources (capacity added), "
                                    "Lists of them and PodGroups\n")

        # nothing was created
        for path in (f"/api/v1/namespaces/{namespace}/pods", f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
                     f"/apis/apps/v1/namespaces/{namespace}/deployments",
                     f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"):
            assert (await kubectl.call("GET", path)).json()["items"] == [], path
    finally:
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)


def _priority_class(name: str, value: int, policy: str) -> dict[str, object]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": policy}


async def test_what_if_gives_a_file_pod_its_priority_class_as_the_apiserver_does(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """A trial finding: a pod of `priorityClassName: <prod-high>` was replayed at priority 0, so an
    8-GPU pod that would preempt read "No preemption victims found". Its class is read from the
    cluster, as the Priority admission plugin reads it; what the plugin refuses is refused in its
    words (checked against the apiserver's own server-side dry run)."""
    label = namespace
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 4, "A100", prefix="prio",
                                    labels={"tessera.dev/e2e-what-if": label})
    high, never = f"{namespace}-high", f"{namespace}-never"
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    try:
        await kubectl.create(classes, _priority_class(high, 1000, "PreemptLowerPriority"))
        await kubectl.create(classes, _priority_class(never, 1000, "Never"))
        # the node's 4 GPUs held by a pod of priority 0 (no class, no globalDefault: the apiserver gives it 0)
        await kubectl.create_pod(namespace, b.pod("batch", namespace, node_name=names[0], phase="Running",
                                                  limits={"nvidia.com/gpu": 4}))

        def probe(extra: str) -> str:
            return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: probe}}\nspec:\n  schedulerName: tessera\n{extra}"
                    f"  nodeSelector: {{tessera.dev/e2e-what-if: {label}}}\n"
                    "  containers:\n  - {name: main, image: x, resources: {limits: {nvidia.com/gpu: 4}}}\n")

        file = tmp_path / "probe.yaml"
        what_if = ("what-if", "--config", "config/binpack.yaml", "-f", str(file), "-n", namespace)
        file.write_text(probe(f"  priorityClassName: {high}\n"))
        result = orjson.loads(await _ok(clean_cluster, *what_if, "-o", "json"))
        [outcome] = result["outcomes"]
        assert (outcome["node"], outcome["preempts"]) == (names[0], [f"{namespace}/batch"]), outcome
        out = await _ok(clean_cluster, *what_if)
        assert f"placed after evicting {namespace}/batch" in out, out

        # its class's preemptionPolicy: Never waits, as upstream's preemption says
        file.write_text(probe(f"  priorityClassName: {never}\n"))
        [outcome] = orjson.loads(await _ok(clean_cluster, *what_if, "-o", "json"))["outcomes"]
        assert outcome["node"] == "" and "preemptionPolicy=Never" in outcome["message"], outcome

        # no class: priority 0, equal to the holder's: nothing to preempt
        file.write_text(probe(""))
        [outcome] = orjson.loads(await _ok(clean_cluster, *what_if, "-o", "json"))["outcomes"]
        assert (outcome["node"], outcome["preempts"]) == ("", []), outcome

        # what the apiserver refuses: a class that does not exist, a priority other than its class's
        for extra, value in ((f"  priorityClassName: {namespace}-missing\n", None), ("  priority: 1000\n", 1000)):
            file.write_text(probe(extra))
            status, out, err = await _plugin(clean_cluster, *what_if)
            pod = yaml.safe_load(file.read_text())
            refused = await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod,
                                         ok=(403,))
            assert (status, out) == (1, ""), err
            assert err == f"error: {file}: Pod {namespace}/probe: {refused.message()}: the apiserver would refuse it\n", \
                (err, refused.message())
            assert value is None or f"integer value of priority ({value})" in err, err

        # the apiserver's own dry run gives the file's pod the value what-if replayed it at
        file.write_text(probe(f"  priorityClassName: {high}\n"))
        created = (await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All",
                                      yaml.safe_load(file.read_text()))).json()
        assert (created["spec"]["priority"], created["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
        assert [p for p in await kubectl.pods(namespace)] == ["batch"]  # nothing was created
    finally:
        for name in (high, never):
            await kubectl.call("DELETE", f"{classes}/{name}", ok=(200, 404))
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)


def _gpu_job(name: str, gpus: int, label: str) -> str:
    return (f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  template:\n    spec:\n"
            f"      schedulerName: tessera\n      restartPolicy: Never\n"
            f"      nodeSelector: {{tessera.dev/e2e-what-if: {label}}}\n"
            f"      containers:\n      - {{name: main, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}\n")



async def _gpu_quota(kubectl: Kube, quotas: str, gpus: int) -> None:
    """A ResourceQuota `gpus` of `gpus` requests.nvidia.com/gpu at `quotas`, waited for until the
    quota controller has filled its status (admission refuses every pod until then)."""
    await kubectl.create(quotas, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus"},
                                  "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}})

    async def synced() -> bool:
        status = (await kubectl.call("GET", f"{quotas}/gpus")).json().get("status") or {}
        return "requests.nvidia.com/gpu" in (status.get("used") or {})
    await eventually(synced, timeout=60)

async def test_what_if_says_a_pod_the_namespaces_resource_quota_refuses(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """A multi-tenant trial: a Job asking 4 GPUs in a namespace whose ResourceQuota allows 3 was
    "placed" while the apiserver refused its pods. what-if reads the quota and says the refusal in
    the words of the apiserver's own (a server-side dry run of the same pod)."""
    label = namespace
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 4, "A100", prefix="quota",
                                    labels={"tessera.dev/e2e-what-if": label})
    quotas = f"/api/v1/namespaces/{namespace}/resourcequotas"
    try:
        await _gpu_quota(kubectl, quotas, 3)

        file = tmp_path / "toobig.yaml"
        file.write_text(_gpu_job("toobig", 4, label))
        what_if = ("what-if", "--config", "config/binpack.yaml", "-f", str(file), "-n", namespace)
        status, out, err = await _plugin(clean_cluster, *what_if, "-o", "json")
        assert (status, err) == (0, ""), err
        result = orjson.loads(out)
        [outcome] = result["outcomes"]
        assert (outcome["pod"], outcome["node"], outcome["refused"], result["refused"]) == (
            f"{namespace}/toobig-0", "", True, 1), outcome
        words = outcome["message"].removeprefix("refused by the apiserver (ResourceQuota admission): ")
        assert words == ("exceeded quota: gpus, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=0, "
                         "limited: requests.nvidia.com/gpu=3"), outcome["message"]
        # the apiserver's own refusal of the pod what-if placed, created in a dry run
        template = yaml.safe_load(file.read_text())["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "toobig-0"}, "spec": template["spec"]}
        refused = await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod, ok=(403,))
        assert refused.message() == f'pods "toobig-0" is forbidden: {words}', refused.message()

        # 3 GPUs fit the quota: placed as before
        file.write_text(_gpu_job("fits", 3, label))
        [outcome] = orjson.loads(await _ok(clean_cluster, *what_if, "-o", "json"))["outcomes"]
        assert (outcome["node"], outcome["refused"]) == (names[0], False), outcome
        assert await kubectl.pods(namespace) == {}  # nothing was created

        # quantities as the apiserver writes them: used (admission's own count of a created pod) in
        # its binary form, the file's request in its decimal one
        await kubectl.create(quotas, {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "memory"},
                                      "spec": {"hard": {"requests.memory": "3Gi"}}})

        async def memory_synced() -> bool:
            status = (await kubectl.call("GET", f"{quotas}/memory")).json().get("status") or {}
            return "requests.memory" in (status.get("used") or {})
        await eventually(memory_synced, timeout=60)
        await kubectl.create_pod(namespace, {"metadata": {"name": "held"}, "spec": {
            "schedulerName": "tessera", "nodeSelector": {"tessera.dev/e2e-what-if": f"{label}-none"},
            "containers": [{"name": "main", "image": "x", "resources": {"requests": {"memory": "2Gi"}}}]}})
        pod["spec"] = {**pod["spec"], "containers": [{"name": "main", "image": "x",
                                                      "resources": {"requests": {"memory": "2000M"}}}]}
        file.write_text(yaml.safe_dump(pod))
        [outcome] = orjson.loads(await _ok(clean_cluster, *what_if, "-o", "json"))["outcomes"]
        refused = await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod, ok=(403,))
        words = outcome["message"].removeprefix("refused by the apiserver (ResourceQuota admission): ")
        assert refused.message() == f'pods "toobig-0" is forbidden: {words}', (refused.message(), outcome)
    finally:
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)


async def test_what_if_gives_the_files_pods_the_namespaces_limit_range_defaults(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """A re-trial: a LimitRange giving each container that states none `nvidia.com/gpu: 1`, a quota
    of 2 GPUs, and a Job of 3 bare pods was "3 would be placed", no GPU taken; LimitRanger defaults
    each pod to 1 GPU before ResourceQuota refuses the third. what-if defaults them as the apiserver
    does (compared with the pod a server-side dry run of the same pod stores), then admits them."""
    label = namespace
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 4, "A100", prefix="limits",
                                    labels={"tessera.dev/e2e-what-if": label})
    quotas = f"/api/v1/namespaces/{namespace}/resourcequotas"
    try:
        await kubectl.create(f"/api/v1/namespaces/{namespace}/limitranges", {
            "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
            "spec": {"limits": [{"type": "Container", "default": {"nvidia.com/gpu": "1", "cpu": "2"},
                                 "defaultRequest": {"cpu": "500m"}, "max": {"memory": "1Gi"}}]}})
        await _gpu_quota(kubectl, quotas, 2)

        file = tmp_path / "bare.yaml"
        file.write_text(f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: bare}}\nspec:\n  parallelism: 3\n"
                        f"  template:\n    spec:\n      schedulerName: tessera\n      restartPolicy: Never\n"
                        f"      nodeSelector: {{tessera.dev/e2e-what-if: {label}}}\n"
                        f"      initContainers:\n      - {{name: setup, image: x}}\n"
                        f"      containers:\n      - {{name: main, image: x, resources: {{limits: {{cpu: '4'}}}}}}\n")
        status, out, err = await _plugin(clean_cluster, "what-if", "--config", "config/binpack.yaml", "-f", str(file),
                                         "-n", namespace, "-o", "json")
        assert (status, err) == (0, ""), err
        result = orjson.loads(out)
        assert [(o["pod"], o["node"], o["refused"]) for o in result["outcomes"]] == [
            (f"{namespace}/bare-0", names[0], False), (f"{namespace}/bare-1", names[0], False),
            (f"{namespace}/bare-2", "", True)], result["outcomes"]
        assert result["outcomes"][2]["message"] == (
            "refused by the apiserver (ResourceQuota admission): exceeded quota: gpus, requested: "
            "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2")
        assert await kubectl.pods(namespace) == {}  # nothing was created

        # the requests and limits the apiserver's LimitRanger gives the same pod, in a dry run
        spec = yaml.safe_load(file.read_text())["spec"]["template"]["spec"]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare-0", "namespace": namespace},
               "spec": spec}
        stored = (await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)).json()
        listed = (await kubectl.call("GET", f"/api/v1/namespaces/{namespace}/limitranges")).json()["items"]
        [defaulted] = limitrange.default_pods([{**pod, "kind": "Pod"}], listed)

        def amounts(pod: dict[str, Any]) -> list[dict[str, dict[str, Fraction]]]:
            return [{kind: {name: parse_quantity(value) for name, value in amounts.items()}
                     for kind, amounts in (container.get("resources") or {}).items()}
                    for field in ("initContainers", "containers") for container in pod["spec"].get(field) or ()]
        assert amounts(defaulted) == amounts(stored), (defaulted["spec"], stored["spec"])
        assert amounts(stored)[1] == {"limits": {"cpu": 4, "memory": 1 << 30, "nvidia.com/gpu": 1},
                                      "requests": {"cpu": 4, "memory": 1 << 30, "nvidia.com/gpu": 1}}
    finally:
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)


def _limited_pod(name: str, label: str, *containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "tessera", "nodeSelector": {"tessera.dev/e2e-what-if": label},
                     "containers": [{"image": "x", **container} for container in containers]}}


async def test_what_if_says_a_pod_the_namespaces_limit_range_refuses(
        clean_cluster: LocalControlPlane, kubectl: Kube, namespace: str, tmp_path: Path) -> None:
    """A LimitRange refuses a pod below its min, above its max, or past its maxLimitRequestRatio
    (Forbidden), and what-if said such pods would be placed. It now says each refused by
    LimitRanger in the words the apiserver's own dry run of the same pod answers with (two errors
    of one pod as the apiserver lists them), and places the pod it admits."""
    label = namespace
    names = await asyncio.to_thread(clean_cluster.add_fake_gpu_nodes, 1, 4, "A100", prefix="limitvalid",
                                    labels={"tessera.dev/e2e-what-if": label})
    try:
        await kubectl.create(f"/api/v1/namespaces/{namespace}/limitranges", {
            "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bounds"},
            "spec": {"limits": [{"type": "Container", "min": {"cpu": "500m"}, "max": {"memory": "1Gi"},
                                 "maxLimitRequestRatio": {"memory": "2"}},
                                {"type": "Pod", "max": {"cpu": "3"}}]}})
        pods = [
            _limited_pod("low", label, {"name": "main", "resources": {"requests": {"cpu": "100m"},
                                                                      "limits": {"cpu": "1"}}}),
            _limited_pod("big", label, {"name": "main", "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}),
            _limited_pod("ratio", label, {"name": "main", "resources": {"requests": {"memory": "256Mi"},
                                                                        "limits": {"cpu": "1", "memory": "1Gi"}}}),
            _limited_pod("sum", label, *({"name": name, "resources": {"limits": {"cpu": "2"}}} for name in "ab")),
            _limited_pod("two", label, {"name": "main", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                                                                      "limits": {"cpu": "1", "memory": "1Gi"}}}),
            _limited_pod("fine", label, {"name": "main", "resources": {"limits": {"cpu": "1"}}})]
        file = tmp_path / "bounds.yaml"
        file.write_text(yaml.safe_dump_all(pods))
        status, out, err = await _plugin(clean_cluster, "what-if", "--config", "config/binpack.yaml", "-f", str(file),
                                         "-n", namespace, "-o", "json")
        assert (status, err) == (0, ""), err
        result = orjson.loads(out)
        outcomes = {o["pod"].removeprefix(f"{namespace}/"): o for o in result["outcomes"]}
        assert (outcomes["fine"]["node"], result["placed"], result["refused"]) == (names[0], 1, 5), result
        said = {name: outcome["message"] for name, outcome in outcomes.items() if outcome["refused"]}
        prefix = "refused by the apiserver (LimitRanger admission): "
        assert said == {name: prefix + words for name, words in {
            "low": "minimum cpu usage per Container is 500m, but request is 100m",
            "big": "maximum memory usage per Container is 1Gi, but limit is 2Gi",
            "ratio": "memory max limit to request ratio per Container is 2, but provided ratio is 4.000000",
            "sum": "maximum cpu usage per Pod is 3, but limit is 4",
            "two": "[minimum cpu usage per Container is 500m, but request is 100m, memory max limit to request ratio "
                   "per Container is 2, but provided ratio is 4.000000]"}.items()}, said
        assert await kubectl.pods(namespace) == {}  # nothing was created
        # the apiserver's own answer to each pod, created in a dry run
        for pod in pods:
            name = pod["metadata"]["name"]
            answer = await kubectl.call("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod,
                                        ok=(201, 403))
            if name in said:
                assert answer.message() == f'pods "{name}" is forbidden: {said[name].removeprefix(prefix)}', (
                    answer.message(), said[name])
            else:
                assert answer.status == 201, answer.message()
    finally:
        await asyncio.to_thread(clean_cluster.remove_fake_gpu_nodes, names)
