"""Install Tessera's CRDs (``deploy/crds/``) into a running apiserver and wait until served.

Why wait past ``Established``: the condition says the API is accepted, but the first requests to
the new resource can still answer 404 for a moment while the handler is wired in, and on
kube-apiserver v1.36 the first *write* to a new CRD blocks for about two seconds. A dry-run
create per CRD absorbs both here, so tests that create custom objects right after start-up do not
see a stall inside their own timing.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from .rest import ApiError, RestClient

__all__ = ["default_crd_dir", "install_crds", "wait_established"]

_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def default_crd_dir() -> Path:
    # scheduler/kube/controlplane/crds.py -> repository root / deploy / crds
    return Path(__file__).resolve().parents[3] / "deploy" / "crds"


def _load(directory: Path) -> list[dict[str, Any]]:
    crds: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                crds.append(doc)
    return crds


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _served_path(crd: dict[str, Any]) -> str:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served", True))
    return f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"


def wait_established(client: RestClient, crd: dict[str, Any], timeout: float = 60.0) -> None:
    """Block until the CRD is Established and a LIST of its resource succeeds."""
    name = crd["metadata"]["name"]
    deadline = time.monotonic() + timeout
    while not _established(client.get(f"{_CRD_PATH}/{name}")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} was not Established within {timeout:.0f} s")
        time.sleep(0.1)
    path = _served_path(crd)
    while True:
        status, _ = client.request_raw("GET", path)
        if status == 200:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} is Established but {path} answers HTTP {status}")
        time.sleep(0.1)


def _warm_up(client: RestClient, crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v.get("served", True))
    scope = "/namespaces/default" if spec.get("scope") == "Namespaced" else ""
    path = f"/apis/{spec['group']}/{version}{scope}/{spec['names']['plural']}?dryRun=All"
    probe = {
        "apiVersion": f"{spec['group']}/{version}",
        "kind": spec["names"]["kind"],
        "metadata": {"name": "tessera-warm-up"},
    }
    # Any answer will do (201, or 422 for a schema that needs a spec): it means writes flow.
    client.request("POST", path, probe, ok=range(200, 500))


def install_crds(client: RestClient, directory: Path | None = None, timeout: float = 60.0) -> list[str]:
    """Server-side apply every CRD in ``directory`` (default ``deploy/crds``); return their names."""
    directory = directory or default_crd_dir()
    crds = _load(directory)
    if not crds:
        raise FileNotFoundError(f"no CustomResourceDefinition found in {directory}")
    for crd in crds:
        name = crd["metadata"]["name"]
        try:
            client.apply(f"{_CRD_PATH}/{name}", crd)
        except ApiError as err:
            raise RuntimeError(f"kube-apiserver rejected CRD {name}: {err.message}") from err
    for crd in crds:
        wait_established(client, crd, timeout)
    with ThreadPoolExecutor(max_workers=len(crds)) as pool:
        for future in [pool.submit(_warm_up, client, crd) for crd in crds]:
            future.result()
    return [crd["metadata"]["name"] for crd in crds]
