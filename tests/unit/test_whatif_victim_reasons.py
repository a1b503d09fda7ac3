"""`kubectl tessera what-if` names why each preemption victim goes, as `explain` does (one home:
the core's `why_evicted`, formatted by `victims.listed`). A trial finding: explain's dry run said
"(gang default/low: would fall below minMember 2)" while what-if listed the same victims bare."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config


def _cluster() -> list[dict[str, Any]]:
    gang = [b.pod(f"low-{i}", node_name="n1", phase="Running", limits={"nvidia.com/gpu": 2}, priority=0,
                  labels=b.gang_labels("low", 2)) for i in range(2)]
    alone = b.pod("solo", node_name="n2", phase="Running", limits={"nvidia.com/gpu": 4}, priority=0)
    return [b.node("n1", gpus=4), b.node("n2", gpus=4), *gang, alone,
            b.pod("hi", limits={"nvidia.com/gpu": 2}, priority=1000),
            b.pod("hi2", limits={"nvidia.com/gpu": 4}, priority=1000)]


def test_what_if_says_why_each_victim_goes_as_explain_does() -> None:
    objects = _cluster()
    result = whatif.what_if(objects, config(BINPACK), 0.0)
    assert result.evicted == ("default/low-0", "default/low-1", "default/solo"), result.evicted
    gang = "gang default/low: would fall below minMember 2"
    assert result.evicted_reasons == (gang, gang, ""), result.evicted_reasons
    text = whatif.render(result)
    assert f"Preemption would evict: default/low-0, default/low-1 ({gang}); default/solo\n" in text, text
    assert whatif.as_dict(result)["evicted_reasons"] == [gang, gang, ""]
    # explain's dry run of a pod that preempts the gang gives the same words
    only_gang = [obj for obj in objects if obj["metadata"]["name"] not in ("solo", "hi2", "n2")]
    explained = explaining.explain(only_gang, "default/hi", config(BINPACK), [], 0.0)
    assert explained is not None
    assert f"preemption would evict default/low-0, default/low-1 ({gang})" in explaining.render(explained, 0.0)


def test_each_placed_pod_names_the_victims_its_preemption_evicted() -> None:
    """A trial finding: RESULT read "placed" and `-o json` `preempts` was [] for the pod whose
    preemption evicted them (the outcome read the final, binding attempt, which preempts none):
    only the summary line named the victims."""
    result = whatif.what_if(_cluster(), config(BINPACK), 0.0)
    by_pod = {outcome.pod: outcome for outcome in result.outcomes}
    gang = "gang default/low: would fall below minMember 2"
    # hi2 (4 GPUs) goes first, by size, and takes n1 from the gang; hi then takes n2 from solo
    assert by_pod["default/hi2"].node == "n1", by_pod
    assert by_pod["default/hi2"].preempts == ("default/low-0", "default/low-1"), by_pod["default/hi2"]
    assert by_pod["default/hi2"].preempt_reasons == (gang, gang)
    assert by_pod["default/hi"].node == "n2", by_pod
    assert by_pod["default/hi"].preempts == ("default/solo",), by_pod["default/hi"]
    assert by_pod["default/hi"].preempt_reasons == ("",)
    text = whatif.render(result)
    assert f"placed after evicting default/low-0, default/low-1 ({gang})" in text, text
    assert "placed after evicting default/solo" in text, text
    rows = {row["pod"]: row for row in whatif.as_dict(result)["outcomes"]}
    assert rows["default/hi2"]["preempts"] == ["default/low-0", "default/low-1"], rows
    assert rows["default/hi"]["preempts"] == ["default/solo"], rows


def test_each_gang_member_names_the_victims_on_its_own_node() -> None:
    """A re-trial finding: a gang of four 2-GPU members that fits only after preempting on two
    nodes showed every victim on its first member's row (the replay credits a gang's preemption to
    the member whose attempt carried it) and the others read plain "placed", though the pods
    evicted on their nodes make their room. Each member names the victims on its own node (members
    sharing a node both name them); a victim on no member's node — lowg-1, evicted on n3 only
    because its gang would fall below its minimum — stays on the first member's row, its reason
    saying why it goes."""
    low = [b.pod(f"low-{node}-{i}", node_name=node, phase="Running", limits={"nvidia.com/gpu": 1}, priority=0)
           for node in ("n1", "n2") for i in range(3)]
    lowg = [b.pod(f"lowg-{i}", node_name=node, phase="Running", limits={"nvidia.com/gpu": 1}, priority=0,
                  labels=b.gang_labels("lowg", 2)) for i, node in enumerate(("n1", "n3"))]
    solo = b.pod("solo", node_name="n2", phase="Running", limits={"nvidia.com/gpu": 1}, priority=0)
    high = [b.pod(f"hg-{i}", limits={"nvidia.com/gpu": 2}, priority=1000, labels=b.gang_labels("hg", 4))
            for i in range(4)]
    result = whatif.what_if([b.node("n1", gpus=4), b.node("n2", gpus=4), b.node("n3", gpus=1),
                             *low, *lowg, solo, *high], config(BINPACK), 0.0)
    on = {"n1": ("default/low-n1-0", "default/low-n1-1", "default/low-n1-2", "default/lowg-0"),
          "n2": ("default/low-n2-0", "default/low-n2-1", "default/low-n2-2", "default/solo")}
    assert sorted(result.evicted) == sorted([*on["n1"], *on["n2"], "default/lowg-1"]), result.evicted
    by_pod = {outcome.pod: outcome for outcome in result.outcomes}
    assert sorted(outcome.node for outcome in result.outcomes) == ["n1", "n1", "n2", "n2"], by_pod
    gang = "gang default/lowg: would fall below minMember 2"
    rows = {row["pod"]: row for row in whatif.as_dict(result)["outcomes"]}
    text = whatif.render(result)
    for key, outcome in by_pod.items():
        own = tuple(sorted(on[outcome.node] + (("default/lowg-1",) if key == "default/hg-0" else ())))
        assert outcome.preempts == own, (key, outcome)
        assert outcome.preempt_reasons == tuple(gang if victim.startswith("default/lowg") else ""
                                                for victim in own), (key, outcome)
        assert rows[key]["preempts"] == list(own), rows[key]
        row = next(line for line in text.splitlines() if line.startswith(f"{key} "))
        assert "placed after evicting " + ", ".join(on[outcome.node][:3]) in row, text
