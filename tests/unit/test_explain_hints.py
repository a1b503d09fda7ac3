"""`kubectl tessera explain`'s hints for what a platform engineer's trial found unexplained: which
pods a preemption evicts and why a whole gang goes (on the preemptor, and on a victim), an
extended resource no node advertises (a typo: `nvidia.com/gpus`) and a PodGroup that does not
exist (`trian` beside `train`). The scheduler's own messages stay upstream's; only explain adds."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl import explain as explaining
from scheduler.sim import builders as b

from tests.helpers import BINPACK, config


def _gang_and_preemptor() -> list[dict[str, Any]]:
    """Two 4-GPU nodes, each full with a member of the priority-100 gang lowg (minMember 2), and
    hi1 (priority 1000, 1 GPU) pending."""
    return [b.node("n1", gpus=4), b.node("n2", gpus=4),
            *(b.pod(f"lowg-{i}", labels=b.gang_labels("lowg", 2), limits={"nvidia.com/gpu": 4}, node_name=node,
                    phase="Running", priority=100) for i, node in enumerate(("n1", "n2"))),
            b.pod("hi1", limits={"nvidia.com/gpu": 1}, priority=1000)]


def test_explain_on_a_preemptor_says_why_its_preemption_takes_a_whole_gang() -> None:
    result = explaining.explain(_gang_and_preemptor(), "default/hi1", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert sorted(result.dry_run.preempts) == ["default/lowg-0", "default/lowg-1"]
    assert result.dry_run.preempt_reasons == ("gang default/lowg: would fall below minMember 2",) * 2
    assert ("; preemption would evict default/lowg-0, default/lowg-1 (gang default/lowg: would fall below "
            "minMember 2)") in explaining.render(result, 0.0)


def test_explain_on_a_victim_names_its_preemptor_and_that_its_whole_gang_goes() -> None:
    """A victim terminating (DisruptionTarget, upstream's text) with its Preempted Event naming
    the preemptor by uid: explain names the pod and why the member on the other node goes too."""
    objs = _gang_and_preemptor()
    for pod in objs[2:4]:
        pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
        pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                        "message": "tessera: preempting to accommodate a higher priority pod"}]
    objs[4]["status"]["nominatedNodeName"] = "n1"
    uid = objs[4]["metadata"]["uid"]
    events = [{"type": "Normal", "reason": "Preempted", "note": f"Preempted by pod {uid} on node n1",
               "reportingController": "tessera", "eventTime": "2026-01-01T00:00:00.000000Z",
               "regarding": {"kind": "Pod", "name": "lowg-1"}}]
    result = explaining.explain(objs, "default/lowg-1", config(BINPACK), events, 0.0)
    assert result is not None
    assert result.status == (
        "terminating on n2, preempted by tessera for pod default/hi1 (nominated to n1); its whole gang default/lowg "
        "goes with it: a gang is never left below its minMember 2 (being deleted; what it holds is freed when it "
        "is gone; finalizers: example.com/keep)")


def test_explain_suggests_the_resource_name_a_typo_missed() -> None:
    """`nvidia.com/gpus: 1` reads upstream's exact `Insufficient nvidia.com/gpus` (kept); explain
    says no node advertises it and which name is close."""
    objs = [b.node("n1", gpus=4), b.pod("typo", limits={"nvidia.com/gpus": 1})]
    result = explaining.explain(objs, "default/typo", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.nodes == (explaining.NodeVerdict("n1", False, "Insufficient nvidia.com/gpus"),)
    assert result.unadvertised == ('nvidia.com/gpus: no node advertises it (did you mean "nvidia.com/gpu"?)',)
    assert '  nvidia.com/gpus: no node advertises it (did you mean "nvidia.com/gpu"?)' in explaining.render(result, 0.0)
    far = explaining.explain([b.node("n1", gpus=4), b.pod("x", limits={"example.com/fpga": 1})], "default/x",
                             config(BINPACK), [], 0.0)
    assert far is not None and far.unadvertised == ("example.com/fpga: no node advertises it",)
    fine = explaining.explain([b.node("n1", gpus=1), b.pod("y", limits={"nvidia.com/gpu": 2})], "default/y",
                              config(BINPACK), [], 0.0)
    assert fine is not None and fine.unadvertised == ()


def test_explain_suggests_the_podgroup_a_typo_missed() -> None:
    """scheduler-plugins' `podgroup "default/trian" not found` is left as it is; explain adds the
    PodGroup of a close name in the namespace."""
    objs = [b.node("n1", gpus=4), b.podgroup("train", 1),
            b.pod("w", labels={"scheduling.x-k8s.io/pod-group": "trian"}, limits={"nvidia.com/gpu": 1})]
    result = explaining.explain(objs, "default/w", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert 'podgroup "default/trian" not found' in result.dry_run.message  # scheduler-plugins' words, as they are
    assert result.missing_podgroup == 'PodGroup default/trian does not exist (did you mean "train"?)'
    assert f"  {result.missing_podgroup}" in explaining.render(result, 0.0)
    other = explaining.explain([b.node("n1"), b.pod("v", labels={"scheduling.x-k8s.io/pod-group": "zzz"})],
                               "default/v", config(BINPACK), [], 0.0)
    assert other is not None and other.missing_podgroup == "PodGroup default/zzz does not exist"


def test_explain_says_a_gangs_surplus_member_goes_alone() -> None:
    """A gang of 3 with minMember 2, one member per node: a pod needing one node's room takes a
    surplus member, and the gang keeps its minimum."""
    objs = [b.node("n1", gpus=4), b.node("n2", gpus=4), b.node("n3", gpus=4),
            *(b.pod(f"g-{i}", labels=b.gang_labels("g", 2), limits={"nvidia.com/gpu": 4}, node_name=f"n{i + 1}",
                    phase="Running", priority=100) for i in range(3)),
            b.pod("hi1", limits={"nvidia.com/gpu": 1}, priority=1000)]
    result = explaining.explain(objs, "default/hi1", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None and len(result.dry_run.preempts) == 1
    assert result.dry_run.preempt_reasons == ("gang default/g: a member above its minMember 2",)


def _victims_of_a_gang() -> list[dict[str, Any]]:
    """lowg's members (priority 100) on n1 and n2 are being evicted (DisruptionTarget), for the
    priority-1000 gang hig (2 members of 4 GPUs, pending) that preempted as one."""
    objs = _gang_and_preemptor()[:4]
    for pod in objs[2:4]:
        pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["example.com/keep"])
        pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                        "message": "tessera: preempting to accommodate a higher priority pod"}]
    return objs


def _preempted(note: str, when: str = "2026-01-01T00:00:00.000000Z") -> dict[str, Any]:
    return {"type": "Normal", "reason": "Preempted", "note": note, "reportingController": "tessera",
            "eventTime": when, "regarding": {"kind": "Pod", "name": "lowg-1"}}


def test_a_victim_of_a_podgroup_names_its_own_node_not_a_nomination() -> None:
    """A gang preempting as one has no single candidate node: each victim's Preempted Event names
    the victim's own node (scheduler/kube/loop.py `_evict`), which explain says as such."""
    group = b.podgroup("hig", 2)
    objs = [*_victims_of_a_gang(), group,
            *(b.pod(f"hig-{i}", limits={"nvidia.com/gpu": 4}, priority=1000,
                    labels={"scheduling.x-k8s.io/pod-group": "hig"}) for i in range(2))]
    uid = group["metadata"]["uid"]
    events = [_preempted(f"Preempted by podgroup {uid} on node n2")]
    result = explaining.explain(objs, "default/lowg-1", config(BINPACK), events, 0.0)
    assert result is not None
    assert "preempted by tessera for podgroup default/hig on node n2;" in result.status, result.status
    assert "nominated" not in result.status


def test_a_victim_of_a_label_gang_names_its_own_node_not_a_nomination() -> None:
    """A label-form gang has no PodGroup object: its pod is named, but the gang preempted as one."""
    objs = [*_victims_of_a_gang(),
            *(b.pod(f"hig-{i}", labels=b.gang_labels("hig", 2), limits={"nvidia.com/gpu": 4}, priority=1000)
              for i in range(2))]
    uid = objs[-2]["metadata"]["uid"]
    events = [_preempted(f"Preempted by pod {uid} on node n2")]
    result = explaining.explain(objs, "default/lowg-1", config(BINPACK), events, 0.0)
    assert result is not None
    assert "preempted by tessera for pod default/hig-0 on node n2;" in result.status, result.status
    # a node other than the victim's own is a single pod's nomination (a gang member under a
    # profile without gang scheduling preempts as a pod), and a preemptor gone is named by uid
    for preemptor in (uid, "0000-gone"):
        events = [_preempted(f"Preempted by pod {preemptor} on node n1")]
        result = explaining.explain(objs, "default/lowg-1", config(BINPACK), events, 0.0)
        assert result is not None
        assert " (nominated to n1);" in result.status, result.status


def test_the_latest_preempted_event_is_chosen_by_time_not_by_text() -> None:
    """An older Event's deprecatedLastTimestamp has whole seconds: as text `...:05Z` sorts after
    `...:05.100000Z`, and an offset sorts by its local digits."""
    objs = _gang_and_preemptor()
    for pod in objs[2:4]:
        pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z")
        pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                        "message": "tessera: preempting to accommodate a higher priority pod"}]
    objs[4]["status"]["nominatedNodeName"] = "n1"
    objs.append(b.pod("other", limits={"nvidia.com/gpu": 1}, priority=1000))
    uid, older = objs[4]["metadata"]["uid"], objs[5]["metadata"]["uid"]
    seconds = {**_preempted(f"Preempted by pod {older} on node n1", ""), "eventTime": None,
               "deprecatedLastTimestamp": "2026-01-01T00:00:05Z"}
    for later in ("2026-01-01T00:00:05.100000Z", "2026-01-01T01:00:06.000000+01:00"):
        events = [seconds, _preempted(f"Preempted by pod {uid} on node n1", later)]
        for order in (events, events[::-1]):
            result = explaining.explain(objs, "default/lowg-1", config(BINPACK), order, 0.0)
            assert result is not None
            assert "for pod default/hi1 (nominated to n1)" in result.status, result.status


def _selected(selector: dict[str, str]) -> list[dict[str, Any]]:
    labels = [{"gpu-type": "h100", "zone": "z1"}, {"gpu-type": "v100", "zone": "z2"}, {"gpu-type": "h100", "zone": "z2"}]
    return [*(b.node(f"n{i}", gpus=4, labels=label) for i, label in enumerate(labels)),
            b.pod("p", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": selector})]


def test_explain_says_which_values_the_nodes_have_for_a_node_selector_no_node_matches() -> None:
    """A trial: `nodeSelector: {gpu-type: a100}` read upstream's "3 node(s) didn't match Pod's node
    affinity/selector" and nothing said which gpu-types exist (or that the label is misspelt)."""
    result = explaining.explain(_selected({"gpu-type": "a100"}), "default/p", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.message == ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
                                      "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert result.unmatched_selector == ('nodeSelector gpu-type=a100: no node has this value (nodes have gpu-type: '
                                         'h100, v100)',)
    assert f"\n  {result.unmatched_selector[0]}\n" in explaining.render(result, 0.0)
    typo = explaining.explain(_selected({"gpu_type": "h100"}), "default/p", config(BINPACK), [], 0.0)
    assert typo is not None
    assert typo.unmatched_selector == ('nodeSelector gpu_type=h100: no node has the label gpu_type (did you mean '
                                       '"gpu-type"?)',)
    both = explaining.explain(_selected({"gpu-type": "v100", "zone": "z1"}), "default/p", config(BINPACK), [], 0.0)
    assert both is not None
    assert both.unmatched_selector == ("nodeSelector gpu-type=v100, zone=z1: each is on some node, but no node has "
                                       "them all",)
    fine = explaining.explain(_selected({"gpu-type": "v100"}), "default/p", config(BINPACK), [], 0.0)
    assert fine is not None and fine.unmatched_selector == ()


def test_a_node_selector_key_without_its_prefix_finds_the_prefixed_label() -> None:
    """A trial: `nodeSelector: {gpu.product: A100-SXM4-80GB}` among nodes labelled
    `nvidia.com/gpu.product` got no suggestion (edit distance alone: the prefix is too far). A label
    whose name after its prefix is the key, or ends with it, is suggested before a close spelling."""
    labels = [{"nvidia.com/gpu.product": "A100-SXM4-80GB", "gpu.produce": "x"}, {"nvidia.com/gpu.count": "8"}]
    objs = [*(b.node(f"n{i}", gpus=4, labels=label) for i, label in enumerate(labels))]

    def hint(selector: dict[str, str]) -> tuple[str, ...]:
        pod = b.pod("p", limits={"nvidia.com/gpu": 1}, spec_extra={"nodeSelector": selector})
        result = explaining.explain([*objs, pod], "default/p", config(BINPACK), [], 0.0)
        assert result is not None
        return result.unmatched_selector

    assert hint({"gpu.product": "A100-SXM4-80GB"}) == (
        'nodeSelector gpu.product=A100-SXM4-80GB: no node has the label gpu.product (did you mean '
        '"nvidia.com/gpu.product"?)',)
    assert hint({"product": "A100-SXM4-80GB"}) == (
        'nodeSelector product=A100-SXM4-80GB: no node has the label product (did you mean "nvidia.com/gpu.product"?)',)
    assert hint({"example.com/gpu.count": "8"}) == (
        'nodeSelector example.com/gpu.count=8: no node has the label example.com/gpu.count (did you mean '
        '"nvidia.com/gpu.count"?)',)
    assert hint({"gpu.prodct": "x"}) == (  # no name equals or ends with it: the close spelling, as before
        'nodeSelector gpu.prodct=x: no node has the label gpu.prodct (did you mean "gpu.produce"?)',)


def test_explain_points_a_hami_resource_name_to_the_sharing_class_section() -> None:
    """`nvidia.com/gpumem` (HAMi's memory slice) is one edit away from `nvidia.com/gpu`, but a
    whole GPU is not what such a pod asked for: explain points to a sharing class instead
    (docs/migrating.md's HAMi section), for each HAMi name, not to the whole-GPU count."""
    objs = [b.node("n1", gpus=4), b.pod("hami", limits={"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000,
                                                         "nvidia.com/gpucores": 30})]
    result = explaining.explain(objs, "default/hami", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.unadvertised == tuple(
        f"nvidia.com/{name}: no node advertises it (a HAMi resource name: under Tessera a GPU slice is asked "
        "through a sharing class, see docs/migrating.md#hami)" for name in ("gpucores", "gpumem"))
    assert "did you mean" not in explaining.render(result, 0.0)
