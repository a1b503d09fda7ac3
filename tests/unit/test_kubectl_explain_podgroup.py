"""`kubectl tessera explain pg/NAME`: a gang explained as a whole. A Kubeflow user's trial:
`explain pg/pt` read `pods "pt" not found in namespace "pg"`, the TYPE taken for a namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from scheduler.core.objects import PODGROUP_LABEL
from scheduler.kube.informers import POD_GROUPS
from scheduler.kube.snapshot import ClusterListing, Unread
from scheduler.kubectl import cli
from scheduler.kubectl.reference import ACCEPTED, BadReference, not_found, reference
from scheduler.sim import builders as b
from tests.helpers import TOO_FEW_WHY, fake_listing

PLUGINS = "scheduling.x-k8s.io"
WORKLOAD = "scheduling.k8s.io"


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "default"}}]}))
    return path


class _Api:
    """The client after the listing: no Lease, no Events (404s)."""

    async def request(self, method: str, path: str, **_: Any) -> Any:
        from scheduler.kube.http import Response
        return Response(404, orjson.dumps({"kind": "Status", "code": 404}))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
         objs: list[dict[str, Any]], *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(cli, "_listing", fake_listing(_Api(), objs))
    status = cli.main(["explain", *args, "--kubeconfig", str(_kubeconfig(tmp_path))])
    out = capsys.readouterr()
    return status, out.out, out.err


def _pytorch_job() -> list[dict[str, Any]]:
    """Two 8-GPU nodes; PodGroup pt (minMember 3, minResources 24 GPUs) of which two members exist,
    pt-master-0 running on n1 and pt-worker-0 pending: the gang waits for its third member."""
    group = b.podgroup("pt", 3)
    group["spec"]["minResources"] = {"nvidia.com/gpu": "24"}
    labels = {PODGROUP_LABEL: "pt"}
    return [b.node("n1", gpus=8), b.node("n2", gpus=8), group,
            b.pod("pt-master-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n1", phase="Running"),
            b.pod("pt-worker-0", labels=labels, limits={"nvidia.com/gpu": 8})]


@pytest.mark.parametrize("text", ["pg/pt", "pgs/pt", "podgroup/pt", "PodGroup/pt", "podgroups/pt",
                                  "podgroups.scheduling.x-k8s.io/pt", "podgroup.scheduling.x-k8s.io/pt",
                                  "podgroups.v1alpha1.scheduling.x-k8s.io/pt"])
def test_explain_takes_a_podgroup_in_kubectls_type_slash_name(text: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = _run(tmp_path, monkeypatch, capsys, _pytorch_job(), text)
    assert (status, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[0].split() == ["PodGroup:", "default/pt", f"({PLUGINS}/v1alpha1)"]
    assert "MinMember:     3" in out and "MinResources:  nvidia.com/gpu: 24" in out
    assert "Members:       2 exist, 1 missing (minMember 3); 1 placed, 1 waiting" in out
    # why the gang waits: the pod form's gang sentences, said once
    few = ("Only 2 pods of PodGroup default/pt exist and its minMember is 3: no member is tried until 1 more is "
           "created (" + TOO_FEW_WHY.format(field="minMember") + ").")
    assert f"  {few}" in lines and out.count(few) == 1
    assert "The PodGroup's minResources can never be met as the cluster is: they ask for 24 nvidia.com/gpu free, " \
           "and the nodes have 16 in all." in out
    # the members, each pending one with its one-line reason
    table = out.split("MEMBER", 1)[1].splitlines()
    assert table[1].split()[:3] == ["pt-master-0", "Running", "n1"]
    assert table[2].split()[:3] == ["pt-worker-0", "Pending", "-"]
    assert "not tried yet" in table[2]


def test_the_members_line_counts_the_gated_apart_as_explain_pod_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A member held by spec.schedulingGates (Kueue's admission gate) was counted among the
    waiting, never tried as they are; `explain POD`'s gang line says "1 waiting, 1 gated"."""
    objs = [*_pytorch_job(), b.pod("pt-worker-1", labels={PODGROUP_LABEL: "pt"}, limits={"nvidia.com/gpu": 8},
                                   spec_extra={"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]})]
    status, out, err = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt")
    assert (status, err) == (0, ""), err
    assert "Members:       3 exist (minMember 3); 1 placed, 1 waiting, 1 gated" in out, out
    status, out, err = _run(tmp_path, monkeypatch, capsys, objs, "pt-worker-0")
    assert (status, err) == (0, ""), err
    assert "1 placed, 1 waiting, 1 gated; phase" in out, out
    doc = orjson.loads(_run(tmp_path, monkeypatch, capsys, objs, "pg/pt", "-o", "json")[1])
    assert [(m["pod"], m["waiting"], m["gated"]) for m in doc["members"]] == [
        ("pt-master-0", False, False), ("pt-worker-0", True, False), ("pt-worker-1", True, True)]


def test_a_workload_api_podgroup_and_json_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    member = b.pod("w-0", limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": "train"}})
    objs = [b.node("n1", gpus=4), b.workload_podgroup("train", 2), member]
    for text in ("podgroups.scheduling.k8s.io/train", "pg/train"):
        status, out, err = _run(tmp_path, monkeypatch, capsys, objs, text, "-o", "json")
        assert (status, err) == (0, ""), err
        doc = orjson.loads(out)
        assert (doc["podgroup"], doc["api_version"], doc["min_member"], doc["missing"]) == (
            "default/train", f"{WORKLOAD}/v1alpha2", 2, 1)
        assert doc["min_resources"] is None  # the Workload API has no minResources: null, not {}
        assert [(m["pod"], m["phase"], m["node"]) for m in doc["members"]] == [("w-0", "Pending", "")]
        assert doc["members"][0]["reason"] == ("pending, not tried: gated by Coscheduling: waiting for minCount pods "
                                               "from a gang to appear in scheduling queue")
        assert doc["explained"] == "w-0" and doc["member"]["too_few_members"].startswith("Only 1 pod of PodGroup")
        # its Events are not read here: said so, not an empty list read as "none"
        assert doc["member"]["events_unread"] == "not read for the PodGroup: kubectl tessera explain w-0"


def test_a_podgroup_with_no_pods_says_how_many_are_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    objs = [b.node("n1", gpus=4), b.podgroup("empty", 2)]
    status, out, _ = _run(tmp_path, monkeypatch, capsys, objs, "pg/empty")
    assert status == 0
    assert "Members:       0 exist, 2 missing (minMember 2)" in out
    assert ("Only 0 pods of PodGroup default/empty exist and its minMember is 2: no member is tried until 2 more "
            "are created (fewer than minMember were created or remain:") in out  # no pod: no MPI launcher missing


def test_a_member_another_scheduler_schedules_waits_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A member whose schedulerName is not Tessera's (a worker template without it: the default
    scheduler's) waits as much as any: Tessera never places it, so the gang cannot form. It was
    counted neither placed nor waiting, without a reason, under "No member waits."."""
    objs = _pytorch_job()
    worker = next(o for o in objs if o["kind"] == "Pod" and o["metadata"]["name"] == "pt-worker-0")
    worker["spec"]["schedulerName"] = "default-scheduler"
    status, out, _ = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt")
    assert status == 0
    assert "Members:       2 exist, 1 missing (minMember 3); 1 placed, 1 waiting" in out
    assert "No member waits." not in out
    row = next(line for line in out.splitlines() if line.startswith("pt-worker-0"))
    assert "not scheduled by Tessera: spec.schedulerName is default-scheduler" in row
    # the gang's own sentences say why it waits, as for a PodGroup none of whose members is Tessera's to try
    assert "Why it waits:" in out and "Only 2 pods of PodGroup default/pt exist and its minMember is 3" in out


def test_a_missing_podgroup_says_kubectls_words_for_the_apis_looked_in(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(tmp_path, monkeypatch, capsys, _pytorch_job(), "pg/ptx", "-n", "default")
    assert status == 1
    assert err == (f'error: podgroups.{PLUGINS} "ptx" not found in namespace "default" (nor podgroups.{WORKLOAD}; '
                   f'did you mean "pt"?)\n')
    status, _, err = _run(tmp_path, monkeypatch, capsys, _pytorch_job(), f"podgroups.{WORKLOAD}/pt")
    assert (status, err) == (1, f'error: podgroups.{WORKLOAD} "pt" not found in namespace "default"\n')


def test_podgroups_that_cannot_be_read_are_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    async def listing(target: Any, namespaces: Any = ()) -> Any:
        api = _Api()
        unread = {POD_GROUPS.label: Unread(POD_GROUPS, "denied (HTTP 403)")}
        _, listed = await fake_listing(api, _pytorch_job())(target, namespaces)
        return api, ClusterListing([o for o in listed.objects if o["kind"] != "PodGroup"], [], unread)

    monkeypatch.setattr(cli, "_listing", listing)
    status = cli.main(["explain", "pg/pt", "--kubeconfig", str(_kubeconfig(tmp_path))])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith(f"error: podgroups.{PLUGINS} cannot be read: denied (HTTP 403)"), err


def test_the_podgroup_types_and_an_unknown_one() -> None:
    ref = reference("pg/pt", None, "research")
    assert (ref.namespace, ref.name, ref.podgroup_apis) == ("research", "pt", (PLUGINS, WORKLOAD))
    assert reference(f"podgroups.{WORKLOAD}/pt", None, "ns").podgroup_apis == (WORKLOAD,)
    assert not_found(reference(f"podgroup.{PLUGINS}/pt", None, "ns")) == \
        f'podgroups.{PLUGINS} "pt" not found in namespace "ns"'
    assert "pg/NAME" in ACCEPTED
    # a prefix that cannot be a namespace is an unknown TYPE, said with the ones explain takes
    with pytest.raises(BadReference, match=r"^unknown TYPE 'cronjobs.batch' in 'cronjobs.batch/x': the argument is"):
        reference("cronjobs.batch/x", None, "default")


def test_a_name_in_both_podgroup_apis_is_refused_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*_pytorch_job(), b.workload_podgroup("pt", 1)]
    status, _, err = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt")
    assert (status, err) == (1, f"error: default/pt is a PodGroup of both APIs: say which, podgroups.{PLUGINS}/pt "
                                f"or podgroups.{WORKLOAD}/pt\n")
    status, out, _ = _run(tmp_path, monkeypatch, capsys, objs, f"podgroups.{WORKLOAD}/pt")
    assert status == 0 and out.startswith(f"PodGroup:  default/pt ({WORKLOAD}/v1alpha2)")


def test_a_workload_api_podgroups_minimum_is_named_by_its_own_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The Workload API's PodGroup has no minMember: its field is schedulingPolicy.gang.minCount."""
    member = b.pod("w-0", limits={"nvidia.com/gpu": 1}, spec_extra={"schedulingGroup": {"podGroupName": "train"}})
    objs = [b.node("n1", gpus=4), b.workload_podgroup("train", 3), member]
    status, out, err = _run(tmp_path, monkeypatch, capsys, objs, "podgroups.scheduling.k8s.io/train")
    assert (status, err) == (0, ""), err
    assert "\nMinCount:  3\n" in out, out
    assert "Members:   1 exist, 2 missing (minCount 3); 0 placed, 1 waiting" in out, out
    assert "minMember" not in out and "MinMember" not in out, out
    # nor minResources: the line is left out, not shown as "-" (a scheduler-plugins PodGroup without one)
    assert "MinResources" not in out, out
    # one the scheduler cannot read says why, and has no minimum (the documented Invalid: line)
    status, out, _ = _run(tmp_path, monkeypatch, capsys, [b.node("n1", gpus=4), b.workload_podgroup("bad", 0)],
                          "podgroups.scheduling.k8s.io/bad")
    assert status == 0
    assert out.splitlines()[1:3] == [
        "Invalid:   the scheduler cannot read it: PodGroup.spec.schedulingPolicy.gang.minCount: Invalid value: 0: "
        "must be greater than or equal to 1", "MinCount:  -"], out


def test_a_missing_pod_named_as_a_podgroup_points_at_the_podgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: `explain short` where only PodGroup short exists read kubectl's
    not-found line alone. The listing already holds the PodGroups: no request more."""
    status, _, err = _run(tmp_path, monkeypatch, capsys, _pytorch_job(), "pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "default"; a PodGroup pt exists: '
                                "kubectl tessera explain podgroup/pt\n")
    # in another namespace than the context's, the command keeps it
    group = b.podgroup("pt", 3)
    group["metadata"]["namespace"] = "research"
    status, _, err = _run(tmp_path, monkeypatch, capsys, [b.node("n1", gpus=8), group], "research/pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "research"; a PodGroup pt exists: '
                                "kubectl tessera explain -n research podgroup/pt\n")
    # no PodGroup of that name: kubectl's words alone
    status, _, err = _run(tmp_path, monkeypatch, capsys, _pytorch_job(), "ptx")
    assert (status, err) == (1, 'error: pods "ptx" not found in namespace "default"\n')


def test_the_podgroup_hint_keeps_the_namespace_given_with_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`explain -n research pt`: the command offered runs as written only with `-n research` (the
    context's namespace is default); it was left out because -n had made research the target's."""
    group = b.podgroup("pt", 3)
    group["metadata"]["namespace"] = "research"
    status, _, err = _run(tmp_path, monkeypatch, capsys, [b.node("n1", gpus=8), group], "-n", "research", "pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "research"; a PodGroup pt exists: '
                                "kubectl tessera explain -n research podgroup/pt\n")


def test_the_podgroup_hint_names_each_api_and_only_the_pods_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A workload-API PodGroup alone is `podgroup/NAME` too; in both APIs `podgroup/NAME` is
    refused as ambiguous, so each API's form is offered; a PodGroup of that name in another
    namespace is not the one asked about."""
    node = b.node("n1", gpus=8)
    status, _, err = _run(tmp_path, monkeypatch, capsys, [node, b.workload_podgroup("pt", 1)], "pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "default"; a PodGroup pt exists: '
                                "kubectl tessera explain podgroup/pt\n")
    status, _, err = _run(tmp_path, monkeypatch, capsys, [node, b.podgroup("pt", 1), b.workload_podgroup("pt", 1)], "pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "default"; a PodGroup pt exists: '
                                "kubectl tessera explain podgroups.scheduling.x-k8s.io/pt or "
                                f"kubectl tessera explain podgroups.{WORKLOAD}/pt\n")
    elsewhere = b.podgroup("pt", 1, namespace="research")
    status, _, err = _run(tmp_path, monkeypatch, capsys, [node, elsewhere], "pt")
    assert (status, err) == (1, 'error: pods "pt" not found in namespace "default"\n')


def test_a_failed_podgroup_names_its_failed_members_and_why_the_phase_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A re-trial: `explain pg/pt` of a PodGroup in phase Failed listed only its Running members
    (the table holds the pods that have not finished), so nothing said which member failed nor
    that the phase stays Failed while the job replaces that pod (scheduler-plugins' controller)."""
    group = b.podgroup("pt", 2)
    group["status"] = {"phase": "Failed", "running": 1, "failed": 1}
    labels = {PODGROUP_LABEL: "pt"}
    objs = [b.node("n1", gpus=8), b.node("n2", gpus=8), group,
            b.pod("pt-master-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n1", phase="Running"),
            b.pod("pt-worker-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n2", phase="Failed"),
            b.pod("pt-worker-0-r", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n2", phase="Running")]
    status, out, err = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt")
    assert (status, err) == (0, ""), err
    assert "Phase:         Failed" in out, out
    [line] = [line for line in out.splitlines() if line.startswith("Failed:")]
    assert line == ("Failed:        pt-worker-0 (phase Failed): scheduler-plugins' Failed phase stays once a member "
                    "failed, also while its job replaces the pod; judge the job by its controller's status "
                    "(docs/migrating.md, \"Reading a gang's state\")"), line
    status, out, _ = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt", "-o", "json")
    assert orjson.loads(out)["failed"] == ["pt-worker-0"]


def test_the_failed_line_names_failed_members_alone_and_says_the_phase_stays_only_in_phase_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A Succeeded member is no failed one, and outside phase Failed nothing is said to stay; in
    phase Failed with the failed pod gone, the line says so. The mutants listing every finished
    member, or telling the phase stays in any phase, passed the test above."""
    group = b.podgroup("pt", 4)  # fewer than minMember live or finished: not Failed (scheduler-plugins' rule)
    labels = {PODGROUP_LABEL: "pt"}
    objs = [b.node("n1", gpus=8), b.node("n2", gpus=8), group,
            b.pod("pt-master-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n1", phase="Running"),
            b.pod("pt-done-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n2", phase="Succeeded"),
            b.pod("pt-worker-0", labels=labels, limits={"nvidia.com/gpu": 8}, node_name="n2", phase="Failed")]
    status, out, err = _run(tmp_path, monkeypatch, capsys, objs, "pg/pt")
    assert (status, err) == (0, ""), err
    assert "Phase:         Failed" not in out, out
    assert [line for line in out.splitlines() if line.startswith("Failed:")] == [
        "Failed:        pt-worker-0 (phase Failed)"], out
    group = b.podgroup("pt", 2)
    group["status"] = {"phase": "Failed", "running": 1, "failed": 1}
    status, out, err = _run(tmp_path, monkeypatch, capsys, [*objs[:2], group, objs[3]], "pg/pt")
    assert (status, err) == (0, ""), err
    [line] = [line for line in out.splitlines() if line.startswith("Failed:")]
    assert line.startswith("Failed:        no member in phase Failed is left: scheduler-plugins' Failed phase stays"), line
