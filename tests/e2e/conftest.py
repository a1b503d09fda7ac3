"""Fixtures for end-to-end tests against a real kube-apiserver + etcd (docs/design.md §6).

Why this shape:
- One control plane per session (``control_plane``, synchronous): starting it costs seconds, and
  tests isolate themselves with their own namespace and uniquely named nodes.
- The binaries are located (and built if missing, which can take many minutes) once, right after
  collection and only when e2e tests were selected, outside any per-test timeout.
- Missing binaries skip the tests on a developer machine but FAIL them when ``CI=true``:
  a green CI run must never hide skipped end-to-end tests.
- ``kube`` gives each test a kubernetes-asyncio ``ApiClient`` made inside that test's event loop,
  because aiohttp sessions are bound to the loop that created them.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from scheduler.kube.controlplane import BinariesNotFound, ControlPlaneBinaries, LocalControlPlane, find_binaries
from scheduler.kube.controlplane.binaries import default_bin_dir
from scheduler.kube.controlplane.components import TEST_CONTROLLERS

_E2E_DIR = Path(__file__).resolve().parent
_BINARIES = pytest.StashKey[ControlPlaneBinaries | str]()


def _no_proxy_for_loopback() -> None:
    # aiohttp honours HTTPS_PROXY (trust_env=True); the test apiserver is on loopback.
    for var in ("NO_PROXY", "no_proxy"):
        current = [part for part in os.environ.get(var, "").split(",") if part]
        for host in ("127.0.0.1", "localhost"):
            if host not in current:
                current.append(host)
        os.environ[var] = ",".join(current)


_no_proxy_for_loopback()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _is_e2e(item: pytest.Item) -> bool:
    return _E2E_DIR == Path(item.path).resolve().parent or _E2E_DIR in Path(item.path).resolve().parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or not any(_is_e2e(item) for item in session.items):
        return
    build = os.environ.get("TESSERA_E2E_BUILD", "1") != "0"
    result: ControlPlaneBinaries | str
    try:
        result = find_binaries(build=False)
    except BinariesNotFound as err:
        result = f"control-plane binaries unavailable: {err}"
        if build and not os.environ.get("KUBEBUILDER_ASSETS"):
            result = _build(config)
    config.stash[_BINARIES] = result


def _build(config: pytest.Config) -> ControlPlaneBinaries | str:
    reporter: Any = config.pluginmanager.get_plugin("terminalreporter")
    log_path = default_bin_dir().parent / "build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if reporter is not None:
        reporter.write_line(
            "building etcd/kube-apiserver/kube-scheduler/kube-controller-manager for the e2e "
            f"tests (one-off, several minutes); log: {log_path}"
        )
    try:
        with open(log_path, "ab") as log:
            return find_binaries(build=True, build_log=log)
    except (BinariesNotFound, OSError) as err:
        return f"control-plane binaries unavailable: {err} (build log: {log_path})"


@pytest.fixture(scope="session")
def control_plane_binaries(request: pytest.FixtureRequest) -> ControlPlaneBinaries:
    result = request.config.stash.get(_BINARIES, None)
    if result is None:  # e.g. fixture used outside tests/e2e
        try:
            result = find_binaries(build=False)
        except BinariesNotFound as err:
            result = str(err)
    if isinstance(result, str):
        if _in_ci():
            pytest.fail(f"CI=true and {result}", pytrace=False)
        pytest.skip(result)
    return result


@pytest.fixture(scope="session")
def control_plane(
    control_plane_binaries: ControlPlaneBinaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalControlPlane]:
    """etcd + kube-apiserver (+ kube-controller-manager when available) with the CRDs installed.

    The controller manager runs ``TEST_CONTROLLERS`` (no workload controllers: see there why).
    The default kube-scheduler is not running; start it with ``start_kube_scheduler()``.
    """
    with LocalControlPlane(
        tmp_path_factory.mktemp("control-plane"),
        binaries=control_plane_binaries,
        with_controller_manager=control_plane_binaries.kube_controller_manager is not None,
        controllers=TEST_CONTROLLERS,
    ) as plane:
        yield plane


@pytest_asyncio.fixture
async def kube(control_plane: LocalControlPlane) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ``ApiClient`` with the admin kubeconfig, bound to this test's loop."""
    from kubernetes_asyncio import config

    api = await config.new_client_from_config(
        config_file=str(control_plane.kubeconfig), persist_config=False
    )
    async with api:
        yield api


@pytest_asyncio.fixture
async def namespace(kube: Any, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace named after the test; its pods and itself are deleted afterwards."""
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem or 'test'}-{secrets.token_hex(3)}"
    v1 = client.CoreV1Api(kube)
    await v1.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"tessera.dev/e2e": "true"}))
    )
    yield name
    try:
        # Bound pods have no kubelet to confirm their deletion: force them out (grace 0) so the
        # namespace controller can finish.
        await v1.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        await v1.delete_namespace(name)
    except (ApiException, OSError) as err:  # e.g. a fault-injection test left the apiserver down
        print(f"namespace {name} cleanup failed: {err}")


# --- live scheduling fixtures ----------------------------------------------------------------


@pytest_asyncio.fixture
async def kubectl(control_plane: LocalControlPlane) -> AsyncIterator[Any]:
    """A small async JSON client (tests/e2e/live.py) with the admin kubeconfig."""
    from tests.e2e.live import Kube

    client = await Kube.connect(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def clean_cluster(control_plane: LocalControlPlane) -> LocalControlPlane:
    """No nodes, devices or classes left over from earlier tests: exact messages and placements."""
    import time

    from scheduler.kube.controlplane import ApiError

    admin = control_plane.admin
    deadline = time.monotonic() + 60
    while True:
        try:
            for path in ("/api/v1/nodes", "/apis/tessera.dev/v1alpha1/extendedresources",
                         "/apis/tessera.dev/v1alpha1/resourceclasses"):
                for item in admin.get(path)["items"]:
                    try:
                        admin.delete(f"{path}/{item['metadata']['name']}")
                    except ApiError as err:
                        if err.status != 404:
                            raise
            return control_plane
        except ApiError as err:
            # after an apiserver restart in an earlier test, CRD storage answers 429 for a while
            if err.status not in (429, 500, 503) or time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest_asyncio.fixture
async def tessera(clean_cluster: LocalControlPlane) -> AsyncIterator[Any]:
    """Start Tessera's live loop in this test's event loop: `loop = await tessera("config/binpack.yaml")`."""
    import asyncio

    from scheduler.api.config import load_config
    from scheduler.kube.http import KubeHttp, RateLimiter, connect
    from scheduler.kube.loop import SchedulerLoop

    running: list[tuple[Any, asyncio.Task[None], list[Any]]] = []

    async def start(config: str = "config/binpack.yaml", seed: int = 0) -> SchedulerLoop:
        cfg = load_config(config)
        api, watch_api = await connect(str(clean_cluster.kubeconfig)), await connect(str(clean_cluster.kubeconfig))
        http = KubeHttp(api, RateLimiter(cfg.client_connection.qps, cfg.client_connection.burst))
        loop = SchedulerLoop(cfg, http, KubeHttp(watch_api), identity="e2e", seed=seed)
        task = asyncio.create_task(loop.run())
        await asyncio.wait_for(loop.informers.wait_synced(), 30)
        running.append((loop, task, [api, watch_api]))
        return loop

    yield start
    for loop, task, clients in running:
        loop.stop()
        await loop.binder.drain(5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for api in clients:
            await api.close()


# --- a real browser (the GPU map page) ----------------------------------------------------------


@pytest.fixture(scope="session")
def chromium() -> str:
    """Chromium for the GPU map's browser test (Debian's package; `.ci/run` installs it), found
    as the control-plane binaries are: missing skips locally but FAILS when CI=true."""
    import shutil

    names = ("chromium", "chromium-browser", "google-chrome")
    path = os.environ.get("TESSERA_CHROMIUM") or next((found for name in names if (found := shutil.which(name))), None)
    if path is None:
        message = "chromium not found (apt-get install chromium, or set TESSERA_CHROMIUM)"
        if _in_ci():
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)
    return path
