"""Command lines of the control-plane components, and why each flag is there.

Kept apart from the lifecycle code in ``cluster.py`` so the flags, which are the part that breaks
on a Kubernetes upgrade, are in one short file. Choices follow envtest (controller-runtime's
``pkg/internal/testing/controlplane``) and kube-scheduler's own integration tests
(``test/integration/framework`` in k8s.io/kubernetes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

__all__ = [
    "DEFAULT_CONTROLLERS",
    "PODGROUP_PROTECTION_CONTROLLER",
    "TEST_CONTROLLERS",
    "ApiserverFiles",
    "apiserver_argv",
    "controller_manager_argv",
    "etcd_argv",
    "KWOK_NODE_ANNOTATION",
    "has_default_route",
    "kwok_argv",
    "kwok_stages",
    "scheduler_argv",
]

# The controllers `tessera dev-cluster --with-controller-manager` runs: kube-controller-manager's
# on-by-default set (v1.36 `--controllers` help), so Jobs, Deployments, StatefulSets, DaemonSets,
# CronJobs, PDBs, quota, garbage collection and Services behave as a user expects, minus those
# that need what a local control plane does not have:
# - a kubelet: node-lifecycle-controller (with --no-kwok nothing renews the fake nodes' Leases, so
#   it would mark every one Unknown and evict its pods; kwok's renewals alone would keep them Ready,
#   tests/e2e/test_kwok_kubelet.py), ttl-controller (tunes kubelet caching only), persistentvolume-attach-detach-controller
#   (attaches volumes to kubelets);
# - a cloud provider or pod CIDRs: cloud-node-lifecycle-controller, node-route-controller,
#   service-lb-controller, node-ipam-controller.
# Controllers behind feature gates that v1.36 leaves off (podcertificaterequest-cleaner, the
# ClusterTrustBundle publisher, resourcepoolstatusrequest and the storage-version ones) are left
# out too: kube-controller-manager would only skip them. podgroup-protection is the exception: the
# plane turns the Workload API's gates on (WORKLOAD_FEATURE_GATES), so kube-apiserver stamps its
# finalizer on every upstream PodGroup and only this controller takes it off again.
PODGROUP_PROTECTION_CONTROLLER = "podgroup-protection-controller"
DEFAULT_CONTROLLERS: tuple[str, ...] = (
    # workloads
    "deployment-controller",
    "replicaset-controller",
    "replicationcontroller-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "disruption-controller",
    "horizontal-pod-autoscaler-controller",
    # object lifecycle
    "garbage-collector-controller",
    "namespace-controller",
    "pod-garbage-collector-controller",
    "resourcequota-controller",
    "taint-eviction-controller",
    PODGROUP_PROTECTION_CONTROLLER,
    # identity, RBAC, certificates
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller",
    "validatingadmissionpolicy-status-controller",
    # Services
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "service-cidr-controller",
    # storage
    "persistentvolume-binder-controller",
    "persistentvolume-expander-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "ephemeral-volume-controller",
    "volumeattributesclass-protection-controller",
    # dynamic resource allocation
    "resourceclaim-controller",
    "device-taint-eviction-controller",
)

# The shared end-to-end test plane runs only what its tests rely on: workload controllers there
# would turn deploy/'s Deployment and DaemonSet (applied by tests/e2e/test_deploy.py) into pods
# that a test-started kube-scheduler then binds onto other tests' fake nodes.
# resourcequota: per-class quota tests need status.used maintained (admission alone never
# decrements it). namespace: deleting a test namespace actually removes its objects.
# garbage-collector: ownerReference cascades (Jobs, PodGroups owned by workloads).
# podgroup-protection: an upstream PodGroup's finalizer comes off once no pod uses the group
# (without it a test namespace holding one never finishes deleting).
# serviceaccount: the `default` ServiceAccount appears in new namespaces, as in a real cluster.
# clusterrole-aggregation: fills the aggregated ClusterRoles admin/edit/view, which are empty
# without it (binding `view` would grant nothing).
TEST_CONTROLLERS: tuple[str, ...] = (
    "resourcequota-controller",
    "namespace-controller",
    "garbage-collector-controller",
    PODGROUP_PROTECTION_CONTROLLER,
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
)


def etcd_argv(binary: Path, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    return [
        str(binary),
        "--name=tessera-local",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=tessera-local={peer}",
        # Tests do not need durability; fsync dominates write latency on CI disks.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


@dataclass(frozen=True)
class ApiserverFiles:
    cert_dir: Path
    ca_file: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_public_key: Path
    token_file: Path


def has_default_route() -> bool:
    """True when the host has an IPv4 default route (kube-apiserver needs one to pick its
    advertise address)."""
    try:
        with open("/proc/net/route") as routes:
            next(routes, None)
            return any(line.split()[1] == "00000000" for line in routes if len(line.split()) > 1)
    except OSError:
        return True  # not Linux: let kube-apiserver decide


# Upstream's Workload API (scheduling.k8s.io/v1alpha2 Workload and PodGroup, a pod's
# spec.schedulingGroup) is alpha in 1.36 and off by default: the local control plane turns it on,
# so Tessera's upstream-PodGroup gangs and kube-scheduler's own gang and topology scheduling can
# run side by side. Tessera itself works without it (the PodGroup informer sees a 404).
WORKLOAD_FEATURE_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
WORKLOAD_API_FLAGS = ("--runtime-config=scheduling.k8s.io/v1alpha2=true", f"--feature-gates={WORKLOAD_FEATURE_GATES}")


def apiserver_argv(
    binary: Path,
    files: ApiserverFiles,
    etcd_url: str,
    port: int,
    extra: Sequence[str] = (),
    *,
    podgroup_protection: bool = True,
) -> list[str]:
    """``podgroup_protection``: keep the PodGroupProtection admission plugin, which puts a
    finalizer on every upstream PodGroup that only kube-controller-manager's
    podgroup-protection-controller removes; a plane without that controller turns it off, or no
    upstream PodGroup could ever be deleted."""
    disabled = ["ServiceAccount", "TaintNodesByCondition", *(() if podgroup_protection else ("PodGroupProtection",))]
    argv = [
        str(binary),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={files.cert_dir}",
        f"--tls-cert-file={files.serving_cert}",
        f"--tls-private-key-file={files.serving_key}",
        # Two ways in: client certificates (CN=user, O=groups) for per-user RBAC tests, and a
        # static admin token for tools that prefer a bearer token.
        f"--client-ca-file={files.ca_file}",
        f"--token-auth-file={files.token_file}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer=https://127.0.0.1:{port}",
        f"--service-account-key-file={files.sa_public_key}",
        f"--service-account-signing-key-file={files.sa_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        # ServiceAccount: pods would need a `default` SA before the controller creates it.
        # TaintNodesByCondition: it taints every new Node not-ready, and no kubelet clears it.
        # ResourceQuota and Priority stay on: quota and priorityClassName must behave as in a
        # real cluster.
        # PodGroupProtection: see the docstring.
        f"--disable-admission-plugins={','.join(disabled)}",
        "--profiling=false",
        *WORKLOAD_API_FLAGS,
    ]
    if not has_default_route():
        # Without a default route kube-apiserver cannot pick an advertise address, and a
        # loopback one is rejected for the `kubernetes` Endpoints; nothing here uses them.
        argv += ["--advertise-address=192.0.2.1", "--endpoint-reconciler-type=none"]
    argv += list(extra)
    return argv


def controller_manager_argv(
    binary: Path,
    kubeconfig: Path,
    controllers: Sequence[str],
    *,
    ca: tuple[Path, Path],
    service_account_key: Path,
    extra: Sequence[str] = (),
) -> list[str]:
    """``ca`` is the cluster CA (certificate, key): it signs approved CSRs and is published as
    ``kube-root-ca.crt``; ``service_account_key`` lets the token controller fill legacy
    service-account token Secrets, as in a real cluster."""
    ca_cert, ca_key = ca
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",  # "If 0, don't serve HTTPS at all": no port to pick or clash on
        f"--controllers={','.join(controllers)}",
        # As kubeadm runs it: each controller acts as its own ServiceAccount (kube-system's
        # replicaset-controller, ...) with the bootstrap system:controller:* roles, never as
        # system:masters. The admission policies exempt system:masters (deploy/README.md,
        # "Admission policies"): a ReplicaSet's pods created as system:masters would pass forged
        # tessera.dev/* annotations from any tenant's pod template.
        "--use-service-account-credentials=true",
        f"--root-ca-file={ca_cert}",
        f"--cluster-signing-cert-file={ca_cert}",
        f"--cluster-signing-key-file={ca_key}",
        f"--service-account-private-key-file={service_account_key}",
        f"--feature-gates={WORKLOAD_FEATURE_GATES}",  # the apiserver's: podgroup-protection needs GenericWorkload
        *extra,
    ]


def scheduler_argv(
    binary: Path, config_path: Path, kubeconfig: Path, cert_dir: Path, port: int
) -> list[str]:
    """kube-scheduler with a config file (``--kubeconfig`` alone is deprecated).

    A loopback secure port is kept (not 0) so /readyz tells when its informers have synced;
    /readyz is in the default ``--authorization-always-allow-paths``.
    """
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return [
        str(binary),
        f"--config={config_path}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        f"--feature-gates={WORKLOAD_FEATURE_GATES}",
    ]


KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")  # kwok's own convention for the nodes it manages


def kwok_stages() -> Path:
    """The Stage set kwok runs with (package data; kwok v0.8.0 ships none)."""
    return Path(__file__).resolve().parents[2] / "data" / "kwok-stages.yaml"


# kwok's pod IPs: clear of the Service range (`--service-cluster-ip-range=10.0.0.0/24`, which must not
# overlap pods or nodes) and of the fake nodes' InternalIPs (fakenodes.NODE_CIDR)
POD_CIDR = "10.244.0.0/16"


def kwok_argv(binary: Path, kubeconfig: Path, config_path: Path, port: int) -> list[str]:
    """kwok for the fake nodes: only nodes with kwok's annotation are managed (never a real or
    another tool's node), their Leases are renewed (``--node-lease-duration-seconds``), and the
    ``--config`` file holds the Stages (`kwok_stages`) plus the options below. ``port`` serves
    kwok's /healthz, which tells when it is up.
    """
    key, value = KWOK_NODE_ANNOTATION
    # a KwokConfiguration read from a file is not defaulted: every option kwok needs is spelled
    # out (the values are kwok v0.8.0's defaults, SetObjectDefaults_KwokConfiguration, except the
    # selector, the wider pod CIDR and no debugging/profiling handlers)
    options = {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
               "options": {"manageAllNodes": False,
                           "manageNodesWithAnnotationSelector": f"{key}={value}",
                           "cidr": POD_CIDR,
                           "nodeLeaseDurationSeconds": 40,
                           "nodeLeaseParallelism": 4,
                           "nodePlayStageParallelism": 4,
                           "podPlayStageParallelism": 4,
                           "podsOnNodeSyncParallelism": 1,
                           "enablePodsOnNodeSyncListPager": True,
                           "enablePodsOnNodeSyncStreamWatch": False,
                           "enableDebuggingHandlers": False,
                           "enableContentionProfiling": False,
                           "enableProfilingHandler": False,
                           "serverAddress": f"127.0.0.1:{port}"}}
    config_path.write_text(yaml.safe_dump(options, sort_keys=False) + "---\n"
                           + kwok_stages().read_text(encoding="utf-8"))
    return [str(binary), f"--kubeconfig={kubeconfig}", f"--config={config_path}"]
