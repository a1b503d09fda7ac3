"""kubernetes-asyncio's connection parts, imported without its generated client.

Tessera uses kubernetes-asyncio for what it is good at: kubeconfig and in-cluster loading, TLS,
tokens and their refresh (`scheduler.kube.http`); it reads and writes the apiserver's JSON itself.
But any import of the library runs its package ``__init__``, which imports the whole generated
client: some 840 modules of OpenAPI models and API classes that Tessera never touches, about a
third of `tessera run`'s imports (bench/README.md, "Start-up, fourth pass").

`import_connection_parts` puts the packages ``kubernetes_asyncio``, ``kubernetes_asyncio.client``
and ``kubernetes_asyncio.client.models`` into ``sys.modules`` without running their ``__init__``,
imports the modules a connection needs (configuration, REST client, ApiClient, the kubeconfig and
in-cluster loaders) and hangs them on those packages where the library's own code looks them up.
The first attribute such a package lacks runs its real ``__init__`` in place (a module
``__getattr__``, PEP 562), so code that does want the typed client — ``client.CoreV1Api`` in the
e2e tests, a model class when ApiClient deserialises — gets it, just later.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["import_connection_parts"]

ROOT = "kubernetes_asyncio"
_PACKAGES_LEFT_UNRUN = (ROOT, f"{ROOT}.client", f"{ROOT}.client.models")
# in dependency order: api_client imports `rest` from the client package
_CLIENT_MODULES = (f"{ROOT}.client.exceptions", f"{ROOT}.client.configuration", f"{ROOT}.client.rest",
                   f"{ROOT}.client.api_client")


def import_connection_parts() -> None:
    """Make ``from kubernetes_asyncio import client, config`` cheap; a no-op once the library is
    imported (whichever way)."""
    if ROOT in sys.modules:
        return
    for name in _PACKAGES_LEFT_UNRUN:
        _install_unrun_package(name)
    for name in _CLIENT_MODULES:
        importlib.import_module(name)
    client = sys.modules[f"{ROOT}.client"]
    # what the real client/__init__ exports and the kubeconfig / in-cluster loaders import by name
    vars(client).update(ApiClient=sys.modules[f"{ROOT}.client.api_client"].ApiClient,
                        Configuration=sys.modules[f"{ROOT}.client.configuration"].Configuration)
    importlib.import_module(f"{ROOT}.config")


def _install_unrun_package(name: str) -> ModuleType:
    """The package `name` in ``sys.modules`` with its ``__path__`` (its submodules import as usual)
    but its ``__init__`` not run until an attribute it lacks is asked for."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package", name=name)
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def run_init(attribute: str) -> object:
        del vars(package)["__getattr__"]  # once: the real __init__ may look itself up while it runs
        loader.exec_module(package)
        return getattr(package, attribute)

    vars(package)["__getattr__"] = run_init
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return package
