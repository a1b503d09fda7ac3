"""The NetworkPolicies that restrict the scheduler's port (the chart's networkPolicy option and
deploy/optional/scheduler-networkpolicy.yaml, deploy/README.md's security notes) are accepted by the
real apiserver (server-side dry run, in the test's namespace: its schema and validation, not a
CNI's; no CNI enforces NetworkPolicy on the test planes)."""

from __future__ import annotations

from typing import Any

from tests.e2e.live import Kube
from tests.unit.test_security_notes import chart_network_policy, network_policy


async def test_the_scheduler_network_policies_are_valid(kubectl: Kube, namespace: str) -> None:
    for policy in (network_policy(), chart_network_policy()):
        policy["metadata"]["namespace"] = namespace
        path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies?dryRun=All"
        created: dict[str, Any] = (await kubectl.call("POST", path, policy)).json()
        assert created["spec"]["podSelector"] == policy["spec"]["podSelector"]
        assert created["spec"]["ingress"][0]["ports"] == [{"port": 10259, "protocol": "TCP"}]
        assert created["spec"]["policyTypes"] == ["Ingress"]
