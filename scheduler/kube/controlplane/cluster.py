"""``LocalControlPlane``: etcd + kube-apiserver (+ optional kube-controller-manager and the
default kube-scheduler) as child processes on loopback, for tests, benchmarks and
``tessera dev-cluster``.

Why real binaries and not a fake API: the scheduler's correctness depends on apiserver behaviour
that fakes get wrong — Binding semantics, resourceVersion conflicts, admission (quota, priority),
CRD validation, watch restarts. Why synchronous: it is used from synchronous pytest fixtures and
from the CLI before any event loop exists; async callers can wrap the few slow methods with
``asyncio.to_thread``.

Everything lives in one directory: certificates under ``pki/``, etcd data under ``etcd-data/``,
one ``<component>.log`` per process, and the admin ``kubeconfig``.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import secrets
import shutil
import ssl
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from . import components
from .binaries import ControlPlaneBinaries, find_binaries
from .certs import CertificateAuthority, generate_service_account_key
from .crds import install_crds
from .fakenodes import FakeGpuNodeSpec, create_fake_gpu_nodes, delete_fake_gpu_nodes, fake_nodes, sanitise_device_id
from .kubeconfig import write_kubeconfig
from .processes import ManagedProcess, ProcessStartError, free_port
from .rest import RestClient

__all__ = ["LocalControlPlane"]

log = logging.getLogger(__name__)

_SERVING_IPS = ("127.0.0.1", "10.0.0.1")
_SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
_ADMIN_USER = "tessera-admin"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    no_proxy = ",".join(filter(None, [env.get("NO_PROXY", ""), "127.0.0.1,localhost"]))
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    return env


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    with opener.open(url, timeout=2) as response:
        return bool(response.status == 200)


def _insecure_context() -> ssl.SSLContext:
    # kube-scheduler serves /readyz with a self-signed certificate; we only read a status code.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class LocalControlPlane:
    """A throw-away Kubernetes control plane rooted at ``directory``.

    Use as ``with LocalControlPlane(tmp) as plane: ...`` or call :meth:`start` / :meth:`stop`.
    After start, :attr:`kubeconfig` is an admin (system:masters) kubeconfig, :attr:`server` the
    https URL and :attr:`admin_token` a bearer token with the same rights.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        binaries: ControlPlaneBinaries | None = None,
        with_controller_manager: bool = False,
        with_kube_scheduler: bool = False,
        with_kwok: bool = False,
        controllers: Sequence[str] = components.DEFAULT_CONTROLLERS,
        install_crds: bool = True,
        crd_dir: Path | None = None,
        extra_apiserver_args: Sequence[str] = (),
        extra_controller_manager_args: Sequence[str] = (),
        start_timeout: float = 90.0,
    ) -> None:
        self.directory = Path(directory).resolve()
        self._binaries = binaries
        self._with_controller_manager = with_controller_manager
        self._with_kube_scheduler = with_kube_scheduler
        self._with_kwok = with_kwok
        self._controllers = tuple(controllers)
        self._install_crds = install_crds
        self._crd_dir = crd_dir
        self._extra_apiserver_args = tuple(extra_apiserver_args)
        self._extra_controller_manager_args = tuple(extra_controller_manager_args)
        self._timeout = start_timeout
        self._pki = self.directory / "pki"
        self._ca: CertificateAuthority | None = None
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self._controller_manager: ManagedProcess | None = None
        self._scheduler: ManagedProcess | None = None
        self._kwok: ManagedProcess | None = None
        self._admin: RestClient | None = None
        self._node_index: dict[str, int] = {}
        self.admin_token = secrets.token_hex(24)
        self.apiserver_port = 0
        self.etcd_url = ""
        self.startup_seconds = 0.0

    # ----------------------------------------------------------------------------- properties
    @property
    def binaries(self) -> ControlPlaneBinaries:
        if self._binaries is None:  # only the components it runs: a build for any other is not waited for
            needed = (("kube-controller-manager",) if self._with_controller_manager else ()) \
                + (("kube-scheduler",) if self._with_kube_scheduler else ()) + (("kwok",) if self._with_kwok else ())
            self._binaries = find_binaries(needed=needed)
        return self._binaries

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate, group system:masters)."""
        return self.directory / "kubeconfig"

    @property
    def token_kubeconfig(self) -> Path:
        """Admin kubeconfig using :attr:`admin_token` instead of a certificate."""
        return self.directory / "admin-token.kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self._pki / "ca.crt"

    @property
    def admin(self) -> RestClient:
        """A synchronous admin client (see :mod:`.rest`); valid after :meth:`start`."""
        if self._admin is None:
            raise RuntimeError("the control plane is not started")
        return self._admin

    def log_files(self) -> dict[str, Path]:
        procs = (self._etcd, self._apiserver, self._controller_manager, self._scheduler, self._kwok)
        return {p.name: p.log_path for p in procs if p is not None}

    # ----------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> LocalControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd and kube-apiserver, install the CRDs and the optional components.
        A no-op when already running."""
        if self._apiserver is not None and self._apiserver.running():
            return
        began = time.monotonic()
        binaries = self.binaries
        self.directory.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._write_pki()
            self._retry_on_port_clash(self._start_etcd)
            self._retry_on_port_clash(self._start_apiserver_new_port)
            self._write_admin_kubeconfigs()
            if self._install_crds:
                names = install_crds(self.admin, self._crd_dir)
                log.info("installed CRDs: %s", ", ".join(names))
            log.info("alpha APIs served: scheduling.k8s.io/v1alpha2 (upstream's Workload API: PodGroup, Workload)")
            if self._with_controller_manager:
                self.start_controller_manager()
            if self._with_kube_scheduler:
                self.start_kube_scheduler()
            if self._with_kwok:
                self.start_kwok()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info(
            "control plane ready at %s in %.1f s (binaries: %s)",
            self.server,
            self.startup_seconds,
            binaries.kube_apiserver.parent,
        )

    def stop(self, grace: float = 5.0) -> None:
        """Stop every component (SIGTERM, then SIGKILL after ``grace`` s). Safe to call twice."""
        for proc in (self._kwok, self._scheduler, self._controller_manager, self._apiserver, self._etcd):
            if proc is not None:
                proc.stop(grace)
        if self._admin is not None:
            self._admin.close()
        atexit.unregister(self.stop)

    def dead_components(self) -> list[str]:
        """Names of started components whose process has exited on its own."""
        procs = (self._etcd, self._apiserver, self._controller_manager, self._scheduler, self._kwok)
        return [p.name for p in procs if p is not None and p.pid is not None and not p.running()]

    @staticmethod
    def _retry_on_port_clash(start: Callable[[], None]) -> None:
        try:
            start()
        except ProcessStartError as err:
            if not err.port_clash:
                raise
            log.warning("port clash, retrying on fresh ports: %s", str(err).splitlines()[0])
            start()

    # ----------------------------------------------------------------------------- pki
    def _write_pki(self) -> None:
        ca = CertificateAuthority.generate("tessera-local-ca")
        self._ca = ca
        ca.as_key_pair().write(self._pki, "ca")
        ca.issue_serving("kube-apiserver", _SERVING_IPS, _SERVING_DNS).write(self._pki, "apiserver")
        sa = generate_service_account_key()
        (self._pki / "sa.pub").write_bytes(sa.cert_pem)
        sa_key = self._pki / "sa.key"
        sa_key.touch(mode=0o600, exist_ok=True)
        sa_key.write_bytes(sa.key_pem)
        (self._pki / "tokens.csv").write_text(
            f'{self.admin_token},{_ADMIN_USER},{_ADMIN_USER},"system:masters"\n'
        )
        (self._pki / "tokens.csv").chmod(0o600)

    def _ca_or_fail(self) -> CertificateAuthority:
        if self._ca is None:
            raise RuntimeError("the control plane is not started")
        return self._ca

    def _client_kubeconfig(self, path: Path, user: str, groups: Sequence[str]) -> Path:
        pair = self._ca_or_fail().issue_client(user, groups)
        return write_kubeconfig(
            path,
            server=self.server,
            ca_pem=self._ca_or_fail().cert_pem,
            user=user,
            cert_pem=pair.cert_pem,
            key_pem=pair.key_pem,
        )

    def _write_admin_kubeconfigs(self) -> None:
        self._client_kubeconfig(self.kubeconfig, _ADMIN_USER, ["system:masters"])
        write_kubeconfig(
            self.token_kubeconfig,
            server=self.server,
            ca_pem=self._ca_or_fail().cert_pem,
            user=f"{_ADMIN_USER}-token",
            token=self.admin_token,
        )

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for a client-certificate user (CN=user, O=groups), with no RBAC of its
        own: bind roles to ``user`` or one of ``groups`` to grant access."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", user)
        return self._client_kubeconfig(self.directory / "users" / f"{safe}.kubeconfig", user, groups)

    # ----------------------------------------------------------------------------- etcd
    def _start_etcd(self) -> None:
        if self._etcd is not None:
            self._etcd.stop()
        data_dir = self.directory / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)  # a half-initialised member from a retry
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        self._etcd = ManagedProcess(
            "etcd",
            components.etcd_argv(self.binaries.etcd, data_dir, client_port, peer_port),
            self.directory / "etcd.log",
            _child_env(),
        )
        self._etcd.start()
        self._etcd.wait_ready(lambda: _http_ok(f"{self.etcd_url}/health"), self._timeout)

    # ----------------------------------------------------------------------------- apiserver
    def _start_apiserver_new_port(self) -> None:
        if self._apiserver is not None:
            self._apiserver.stop()
        self.apiserver_port = free_port()
        self._apiserver = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self.start_apiserver()

    def start_apiserver(self) -> None:
        """(Re)start kube-apiserver on :attr:`apiserver_port` and wait for /readyz."""
        if self._apiserver is None:
            files = components.ApiserverFiles(
                cert_dir=self._pki / "apiserver-generated",
                ca_file=self.ca_file,
                serving_cert=self._pki / "apiserver.crt",
                serving_key=self._pki / "apiserver.key",
                sa_key=self._pki / "sa.key",
                sa_public_key=self._pki / "sa.pub",
                token_file=self._pki / "tokens.csv",
            )
            argv = components.apiserver_argv(
                self.binaries.kube_apiserver,
                files,
                self.etcd_url,
                self.apiserver_port,
                self._extra_apiserver_args,
                podgroup_protection=self._with_controller_manager
                and components.PODGROUP_PROTECTION_CONTROLLER in self._controllers,
            )
            self._apiserver = ManagedProcess(
                "kube-apiserver", argv, self.directory / "kube-apiserver.log", _child_env()
            )
        if self._admin is None:
            self._admin = RestClient(self.server, str(self.ca_file), token=self.admin_token)
        admin = self._admin
        self._apiserver.start()
        self._apiserver.wait_ready(
            lambda: admin.request_raw("GET", "/readyz")[0] == 200, self._timeout, interval=0.2
        )

    def stop_apiserver(self, grace: float = 5.0) -> None:
        """Stop kube-apiserver only; etcd keeps the data for :meth:`start_apiserver`.

        kube-apiserver drains open watches on SIGTERM and can take a minute; after ``grace``
        seconds it is killed. ``grace=0`` kills it at once, like a crash.
        """
        if self._apiserver is not None:
            self._apiserver.stop(grace)

    def restart_apiserver(self, grace: float = 5.0) -> None:
        """Stop and start kube-apiserver on the same port (clients keep their kubeconfig)."""
        self.stop_apiserver(grace)
        self.start_apiserver()

    # ----------------------------------------------------------------------------- kcm
    def start_controller_manager(self) -> None:
        """Start kube-controller-manager (idempotent); ready when it has created the `default`
        ServiceAccount, or when its process is still alive after a few seconds if the
        serviceaccount controller is not enabled."""
        binary = self.binaries.kube_controller_manager
        if binary is None:
            raise FileNotFoundError("kube-controller-manager binary is not available")
        if self._controller_manager is not None and self._controller_manager.running():
            return
        kubeconfig = self._client_kubeconfig(
            self.directory / "kube-controller-manager.kubeconfig",
            "system:kube-controller-manager",
            [],  # the bootstrap ClusterRole system:kube-controller-manager (kubeadm's identity)
        )
        self._controller_manager = ManagedProcess(
            "kube-controller-manager",
            components.controller_manager_argv(
                binary,
                kubeconfig,
                self._controllers,
                ca=(self.ca_file, self._pki / "ca.key"),
                service_account_key=self._pki / "sa.key",
                extra=self._extra_controller_manager_args,
            ),
            self.directory / "kube-controller-manager.log",
            _child_env(),
        )
        self._controller_manager.start()
        admin = self.admin
        if any(c.startswith("serviceaccount") for c in self._controllers):
            path = "/api/v1/namespaces/default/serviceaccounts/default"
            probe: Callable[[], bool] = lambda: admin.request_raw("GET", path)[0] == 200
        else:
            until = time.monotonic() + 3.0
            probe = lambda: time.monotonic() > until
        self._controller_manager.wait_ready(probe, self._timeout, interval=0.2)

    def stop_controller_manager(self) -> None:
        if self._controller_manager is not None:
            self._controller_manager.stop()

    # ----------------------------------------------------------------------------- scheduler
    def start_kube_scheduler(self) -> None:
        """Start the default kube-scheduler (idempotent) as user system:kube-scheduler, and wait
        until its /readyz says its informers are synced."""
        binary = self.binaries.kube_scheduler
        if binary is None:
            raise FileNotFoundError("kube-scheduler binary is not available")
        if self._scheduler is not None and self._scheduler.running():
            return
        kubeconfig = self._client_kubeconfig(
            self.directory / "kube-scheduler.kubeconfig", "system:kube-scheduler", []
        )

        def attempt() -> None:
            port = free_port()
            proc = ManagedProcess(
                "kube-scheduler",
                components.scheduler_argv(
                    binary,
                    self.directory / "kube-scheduler.yaml",
                    kubeconfig,
                    self.directory / "kube-scheduler-certs",
                    port,
                ),
                self.directory / "kube-scheduler.log",
                _child_env(),
            )
            self._scheduler = proc
            proc.start()
            context = _insecure_context()
            proc.wait_ready(
                lambda: _http_ok(f"https://127.0.0.1:{port}/readyz", context), self._timeout, 0.2
            )

        self._retry_on_port_clash(attempt)

    def stop_kube_scheduler(self) -> None:
        if self._scheduler is not None:
            self._scheduler.stop()

    # ----------------------------------------------------------------------------- kwok
    def start_kwok(self) -> None:
        """Start kwok (idempotent) for the fake nodes: their pods run, complete the delay in their
        `pod-complete.stage.kwok.x-k8s.io/delay` annotation after they started (Job pods 1 s) and are
        removed when deleted (Stages: scheduler/data/kwok-stages.yaml). Ready when /healthz answers."""
        binary = self.binaries.kwok
        if binary is None:
            raise FileNotFoundError("the kwok binary is not available (hack/build-control-plane.sh builds it)")
        if self._kwok is not None and self._kwok.running():
            return
        kubeconfig = self._client_kubeconfig(self.directory / "kwok.kubeconfig", "kwok", ["system:masters"])

        def attempt() -> None:
            port = free_port()
            proc = ManagedProcess(
                "kwok",
                components.kwok_argv(binary, kubeconfig, self.directory / "kwok.yaml", port),
                self.directory / "kwok.log",
                _child_env(),
            )
            self._kwok = proc
            proc.start()
            proc.wait_ready(lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"), self._timeout, 0.2)

        self._retry_on_port_clash(attempt)

    def stop_kwok(self) -> None:
        if self._kwok is not None:
            self._kwok.stop()

    # ----------------------------------------------------------------------------- fake nodes
    def add_fake_gpu_nodes(
        self,
        n: int,
        gpus_per_node: int,
        gpu_model: str,
        memory: str = "32Gi",
        *,
        prefix: str | None = None,
        labels: Mapping[str, str] | None = None,
        resource_name: str = "nvidia.com/gpu",
        vendor: str = "nvidia",
        compute_capability: str | None = None,
        numa_nodes: int = 2,
        nvlink_groups: tuple[int, ...] = (),
        cpu: str = "64",
        node_memory: str = "256Gi",
        max_pods: int = 110,
        workers: int = 16,
        agent_heartbeat: bool = False,
    ) -> list[str]:
        """Create ``n`` Ready nodes with ``gpus_per_node`` allocatable ``resource_name`` each and
        one healthy ExtendedResource per GPU; return the node names. With ``agent_heartbeat`` the
        devices carry a heartbeat as if a node agent served them (the caller keeps it fresh).

        Names are ``<prefix>-NNN`` (prefix defaults to ``<model>-node``) and continue after the
        nodes this plane already made with that prefix, so repeated calls never collide.
        """
        prefix = prefix or f"{sanitise_device_id(gpu_model)}-node"
        first = self._node_index.get(prefix, 0)
        self._node_index[prefix] = first + n
        names = [f"{prefix}-{i:03d}" for i in range(first, first + n)]
        spec = FakeGpuNodeSpec(
            gpus_per_node=gpus_per_node,
            gpu_model=gpu_model,
            memory=memory,
            vendor=vendor,
            resource_name=resource_name,
            compute_capability=compute_capability,
            numa_nodes=numa_nodes,
            nvlink_groups=nvlink_groups,
            cpu=cpu,
            node_memory=node_memory,
            max_pods=max_pods,
            labels=dict(labels or {}),
            agent_heartbeat=agent_heartbeat,
        )
        began = time.monotonic()
        create_fake_gpu_nodes(self.admin, names, spec, workers)
        log.info(
            "created %s in %.1f s",
            fake_nodes([(n, gpu_model)], gpus_per_node),
            time.monotonic() - began,
        )
        return names

    def remove_fake_gpu_nodes(self, names: Sequence[str] | None = None) -> None:
        """Delete the named fake nodes (default: all of them) and their ExtendedResources.
        Pods bound to them stay."""
        delete_fake_gpu_nodes(self.admin, names)
