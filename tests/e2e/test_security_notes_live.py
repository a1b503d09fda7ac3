"""The NetworkPolicy of deploy/README.md's security notes is accepted by the real apiserver
(server-side dry run, in the test's namespace: its schema and validation, not a CNI's)."""

from __future__ import annotations

from typing import Any

from tests.e2e.live import Kube
from tests.unit.test_security_notes import network_policy


async def test_the_security_notes_network_policy_is_valid(kubectl: Kube, namespace: str) -> None:
    policy = network_policy()
    policy["metadata"]["namespace"] = namespace
    path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies?dryRun=All"
    created: dict[str, Any] = (await kubectl.call("POST", path, policy)).json()
    assert created["spec"]["podSelector"] == policy["spec"]["podSelector"]
    assert created["spec"]["ingress"][0]["ports"] == [{"port": 10251, "protocol": "TCP"}]
