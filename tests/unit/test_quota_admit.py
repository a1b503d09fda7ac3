"""`kubectl.quota`: ResourceQuota admission as the apiserver does it for what-if -f's pods (its
arithmetic, which resources a pod charges, scopes, the message's form), case by case against
upstream's controller.go CheckRequest and pods.go (tests/unit/test_whatif_quota.py has the command;
tests/e2e/test_whatif_workloads_live.py checks the message against a real apiserver)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from scheduler.api.quantity import go_quantity
from scheduler.kubectl.quota import admit, pod_usage


def _quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, namespace: str = "t",
           **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard, **spec},
            "status": {"hard": hard, "used": {key: "0" for key in hard} if used is None else used}}


def _pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
         namespace: str = "t", **spec: Any) -> dict[str, Any]:
    resources = {key: value for key, value in (("requests", requests), ("limits", limits)) if value}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "x", "resources": resources}], **spec}}


def _refused(pods: list[dict[str, Any]], quotas: list[dict[str, Any]]) -> dict[str, str]:
    refusals, warnings = admit(pods, quotas)
    assert warnings == []
    return {refusal.pod: refusal.message for refusal in refusals}


def test_usage_is_what_the_pod_evaluator_charges() -> None:
    """Requests default to limits; cpu, memory and ephemeral-storage as X and requests.X, limits
    as limits.X; an extended resource only as requests.X; hugepages as X and requests.X; pods and
    count/pods 1; init containers raise the total to their peak, overhead adds to both."""
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                       "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                           {"name": "b", "resources": {"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "100m"}}
    usage, binary = pod_usage(spec)
    assert usage == {"count/pods": 1, "pods": 1, "cpu": Fraction(31, 10), "requests.cpu": Fraction(31, 10),
                     "limits.cpu": Fraction(11, 10), "memory": 2**31, "requests.memory": 2**31,
                     "limits.memory": 2**30, "requests.nvidia.com/gpu": 2,
                     "hugepages-2Mi": 4 * 2**20, "requests.hugepages-2Mi": 4 * 2**20}
    assert binary["requests.memory"] and binary["hugepages-2Mi"] and not binary["requests.cpu"]


def test_each_pod_adds_to_used_and_the_message_names_the_exceeded_resources_sorted() -> None:
    quotas = [_quota("q", {"requests.nvidia.com/gpu": "4", "requests.cpu": "2", "pods": "10"},
                     {"requests.nvidia.com/gpu": "1", "requests.cpu": "500m", "pods": "1"})]
    pods = [_pod("a", {"cpu": "1"}, {"nvidia.com/gpu": "2"}), _pod("b", {"cpu": "1"}, {"nvidia.com/gpu": "2"}),
            _pod("c", {"cpu": "100m"}, {"nvidia.com/gpu": "1"})]
    # a: gpu 3/4, cpu 1.5/2 admitted; b: gpu 5 > 4 and cpu 2.5 > 2; c: gpu 4, cpu 1.6: admitted
    assert _refused(pods, quotas) == {"t/b": "exceeded quota: q, requested: requests.cpu=1,requests.nvidia.com/gpu=2, "
                                             "used: requests.cpu=1500m,requests.nvidia.com/gpu=3, "
                                             "limited: requests.cpu=2,requests.nvidia.com/gpu=4"}


def test_every_applying_quota_is_checked_before_any_is_charged() -> None:
    """y (class high) fits a-gpus but b-high refuses it, so it adds nothing to a-gpus: z, which
    b-high does not apply to, still fits a-gpus."""
    quotas = [_quota("a-gpus", {"requests.nvidia.com/gpu": "2"}),
              _quota("b-high", {"count/pods": "1"}, {"count/pods": "1"}, scopes=["PriorityClass"])]
    pods = [_pod("x", limits={"nvidia.com/gpu": "1"}), _pod("y", limits={"nvidia.com/gpu": "1"}, priorityClassName="high"),
            _pod("z", limits={"nvidia.com/gpu": "1"})]
    assert _refused(pods, quotas) == {"t/y": "exceeded quota: b-high, requested: count/pods=1, used: count/pods=1, "
                                             "limited: count/pods=1"}


def test_a_quota_applies_only_to_its_namespace_and_to_resources_pods_use() -> None:
    quotas = [_quota("other", {"pods": "0"}, namespace="u"), _quota("services", {"services": "0"}),
              _quota("plain", {"nvidia.com/gpu": "0"})]  # extended resources count as requests.X only
    assert _refused([_pod("x", limits={"nvidia.com/gpu": "1"})], quotas) == {}


def test_a_quota_without_usage_of_what_it_limits_refuses_as_the_apiserver_does() -> None:
    quota = _quota("new", {"requests.nvidia.com/gpu": "4", "pods": "5", "services": "1"}, {"pods": "0"})
    assert _refused([_pod("x")], [quota]) == {"t/x": "status unknown for quota: new, resources: "
                                                     "pods,requests.nvidia.com/gpu"}
    # the controller has not synced it (no status.hard): it applies to nothing yet
    assert _refused([_pod("x")], [{**quota, "status": {}}]) == {}


@pytest.mark.parametrize(("scope", "pod", "applies"), [
    ({"scopes": ["Terminating"]}, {"activeDeadlineSeconds": 60}, True),
    ({"scopes": ["Terminating"]}, {}, False),
    ({"scopes": ["NotTerminating"]}, {}, True),
    ({"scopes": ["NotTerminating"]}, {"activeDeadlineSeconds": 0}, False),
    ({"scopes": ["BestEffort"]}, {}, True),
    ({"scopes": ["NotBestEffort"]}, {}, False),
    ({"scopes": ["BestEffort"]}, {"resources": {"requests": {"cpu": "1"}}}, False),  # pod-level
    ({"scopes": ["BestEffort"]}, {"resources": {"requests": {"cpu": "0"}}}, True),  # a zero is no request (QOS)
    ({"scopes": ["PriorityClass"]}, {"priorityClassName": "high"}, True),
    ({"scopes": ["PriorityClass"]}, {}, False),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                              "values": ["high", "mid"]}]}}, {"priorityClassName": "high"}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                              "values": ["high"]}]}}, {}, False),
    # upstream's selector sees no priorityClass label on a pod without a class, not an empty one
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In",
                                              "values": [""]}]}}, {}, False),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn",
                                              "values": ["high"]}]}}, {}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn",
                                              "values": ["high"]}]}}, {"priorityClassName": "high"}, False),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
     {"priorityClassName": "low"}, True),
    ({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]}},
     {"priorityClassName": "low"}, False),
    # every scope must match: a terminating pod of class high, under NotTerminating and PriorityClass
    ({"scopes": ["NotTerminating", "PriorityClass"]}, {"priorityClassName": "high", "activeDeadlineSeconds": 5},
     False),
])
def test_a_scoped_quota_applies_to_the_pods_its_scopes_match(scope: dict[str, Any], pod: dict[str, Any],
                                                           applies: bool) -> None:
    refused = _refused([_pod("x", **pod)], [_quota("q", {"pods": "0"}, **scope)])
    assert bool(refused) == applies, refused


def test_a_quota_with_a_scope_not_read_is_set_aside_with_a_warning() -> None:
    quota = _quota("q", {"pods": "0"}, scopeSelector={"matchExpressions": [
        {"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}]})
    refusals, warnings = admit([_pod("x")], [quota])
    assert refusals == []
    assert warnings == ["ResourceQuota t/q: scope CrossNamespacePodAffinity is not read: taken as not applying to "
                        "the file's pods"]


@pytest.mark.parametrize(("amount", "binary", "said"), [
    (Fraction(0), False, "0"), (Fraction(4), False, "4"), (Fraction(4000), False, "4k"), (Fraction(3, 2), False, "1500m"),
    (Fraction(1500), False, "1500"), (Fraction(10**9), False, "1G"), (Fraction(2**30), True, "1Gi"),
    (Fraction(1500), True, "1500"), (Fraction(2000), True, "2000"), (Fraction(512), True, "512"),
    (Fraction(1, 2), True, "500m"), (Fraction(3 * 2**20), True, "3Mi"),
    (Fraction(1024), True, "1Ki"), (Fraction(1023), True, "1023"),  # BinarySI from 1024 on, as CanonicalizeBytes
    (Fraction(1, 3 * 10**9), False, "1n"),  # finer than nano: rounded up
])
def test_quantities_are_written_as_gos_quantity_writes_them(amount: Fraction, binary: bool, said: str) -> None:
    assert go_quantity(amount, binary) == said


def test_each_quantity_keeps_the_form_it_is_written_in() -> None:
    """limited in status.hard's form, used in status.used's (a zero one takes the form of the
    first pod's amount added to it), requested in the pod's: as Go's Quantity writes each."""
    quotas = [_quota("mem", {"requests.memory": "3Gi"}, {"requests.memory": "0"})]
    refused = _refused([_pod("a", {"memory": "2Gi"}), _pod("b", {"memory": "2000M"})], quotas)
    assert refused == {"t/b": "exceeded quota: mem, requested: requests.memory=2G, used: requests.memory=2Gi, "
                              "limited: requests.memory=3Gi"}


def test_a_zero_request_charges_nothing_even_to_a_quota_already_exceeded() -> None:
    # CheckRequest drops zero usage (quota.RemoveZeros) before comparing: a quota whose hard was
    # lowered below its used still admits a pod that asks none of it
    quotas = [_quota("cpu", {"requests.cpu": "1"}, {"requests.cpu": "2"})]
    assert _refused([_pod("x", {"cpu": "0"})], quotas) == {}


def test_of_several_quotas_refusing_a_pod_the_first_by_name_is_said() -> None:
    quotas = [_quota("zz", {"pods": "0"}), _quota("aa", {"pods": "0"})]
    assert _refused([_pod("x")], quotas) == {"t/x": "exceeded quota: aa, requested: pods=1, used: pods=0, limited: pods=0"}


def test_a_plain_hugepages_quota_applies_to_pods() -> None:
    # the pod evaluator's resource prefixes: hugepages- as well as requests.hugepages-
    quotas = [_quota("huge", {"hugepages-2Mi": "2Mi"})]
    assert _refused([_pod("x", {"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": "4Mi"})], quotas) == {
        "t/x": "exceeded quota: huge, requested: hugepages-2Mi=4Mi, used: hugepages-2Mi=0, limited: hugepages-2Mi=2Mi"}
