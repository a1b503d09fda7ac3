"""What a watched kind's type says of it (`ResourceKind`: its resource's names, whether it is
namespaced) agrees with the CRDs Tessera ships: `kubectl tessera`'s permission hints and
per-namespace lists, and `tessera record --kinds`, read those facts there and nowhere else."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.kube.informers import SCHEDULER_KINDS

REPO = Path(__file__).resolve().parents[2]


def test_each_shipped_crd_kind_has_its_plural_group_and_scope() -> None:
    checked = []
    for path in sorted((REPO / "deploy/crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        [kind] = [k for k in SCHEDULER_KINDS if k.kind == spec["names"]["kind"] and k.group == spec["group"]]
        assert kind.plural == spec["names"]["plural"], path.name
        assert kind.resource == crd["metadata"]["name"], path.name
        assert kind.namespaced == (spec["scope"] == "Namespaced"), path.name
        assert kind.aliases[:2] == (spec["names"]["singular"], spec["names"]["plural"]), path.name
        checked.append(kind.label)
    assert len(checked) == 3


def test_builtin_kinds_are_named_as_kubectl_names_them() -> None:
    by_label = {kind.label: kind for kind in SCHEDULER_KINDS}
    assert by_label["Node"].aliases == ("node", "nodes") and not by_label["Node"].namespaced
    assert by_label["Pod"].resource == "pods" and by_label["Pod"].namespaced
    assert by_label["PodDisruptionBudget"].resource == "poddisruptionbudgets.policy"
    assert by_label["PodGroup.scheduling.k8s.io"].aliases == (
        "podgroup", "podgroups", "podgroups.scheduling.k8s.io", "podgroup.scheduling.k8s.io")
    assert {kind.label for kind in SCHEDULER_KINDS if kind.namespaced} == {
        "Pod", "PodGroup", "PodDisruptionBudget", "PodGroup.scheduling.k8s.io", "PersistentVolumeClaim"}
