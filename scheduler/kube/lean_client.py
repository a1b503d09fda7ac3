"""kubernetes-asyncio's connection parts, imported without its generated client.

Tessera uses kubernetes-asyncio for what it is good at: kubeconfig and in-cluster loading, TLS,
tokens and their refresh (`scheduler.kube.http`); it reads and writes the apiserver's JSON itself.
But any import of the library runs its package ``__init__``, which imports the whole generated
client: some 840 modules of OpenAPI models and API classes that Tessera never touches, a sixth of
`tessera run`'s import time on an idle machine and more beside a busy apiserver (bench/README.md,
"Start-up, fourth pass").

`import_connection_parts` puts the packages ``kubernetes_asyncio.client`` and
``kubernetes_asyncio.client.models`` into ``sys.modules`` without running their ``__init__``,
imports the modules a connection needs (configuration, REST client, ApiClient) and hangs them on
the client package where the library's own code looks them up; then the top-level package runs
as usual (the kubeconfig and in-cluster loaders, watch, stream, dynamic, utils: a few dozen
modules). The first attribute a deferred package lacks runs its real ``__init__`` in place (a
module ``__getattr__``, PEP 562), once, under a lock, as an import would: code that does want the
typed client — ``client.CoreV1Api`` in the e2e tests, a model class when ApiClient deserialises —
gets it, just later.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from importlib.abc import Loader
from importlib.machinery import ModuleSpec

__all__ = ["import_connection_parts"]

ROOT = "kubernetes_asyncio"
CLIENT = f"{ROOT}.client"
_DEFERRED_PACKAGES = (CLIENT, f"{CLIENT}.models")
# in dependency order: api_client imports `rest` from the client package
_CLIENT_MODULES = (f"{CLIENT}.exceptions", f"{CLIENT}.configuration", f"{CLIENT}.rest", f"{CLIENT}.api_client")
# a deferred package's __init__ runs at most once at a time, whichever thread asks first
_INIT_LOCK = threading.RLock()


def import_connection_parts() -> None:
    """Make ``from kubernetes_asyncio import client, config`` cheap; a no-op once the library is
    imported (whichever way). On failure nothing is left behind: the next import is a plain one."""
    if ROOT in sys.modules:
        return
    try:
        root_spec, root_loader = _package_spec(ROOT)
        root = importlib.util.module_from_spec(root_spec)
        sys.modules[ROOT] = root  # its __init__ runs last, once the client package is in place
        for name in _DEFERRED_PACKAGES:
            _install_deferred_package(name)
        for name in _CLIENT_MODULES:
            importlib.import_module(name)
        client = sys.modules[CLIENT]
        # what the real client/__init__ exports and the kubeconfig / in-cluster loaders import by name
        vars(client).update(ApiClient=sys.modules[f"{CLIENT}.api_client"].ApiClient,
                            Configuration=sys.modules[f"{CLIENT}.configuration"].Configuration)
        root_loader.exec_module(root)
    except BaseException:
        for name in [name for name in sys.modules if name == ROOT or name.startswith(f"{ROOT}.")]:
            del sys.modules[name]
        raise


def _package_spec(name: str) -> tuple[ModuleSpec, Loader]:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package", name=name)
    return spec, spec.loader


def _install_deferred_package(name: str) -> None:
    """The package `name` in ``sys.modules`` with its ``__path__`` (its submodules import as usual)
    but its ``__init__`` not run until an attribute it lacks is asked for.

    Dunder names other than ``__all__`` (``__warningregistry__``, looked up on every module by
    `warnings` and unittest) are simply missing, as on any module: they must not cost the full
    load. A failed ``__init__`` keeps the hook, so the next access tries again, as the next
    import of a module that failed to import would."""
    spec, loader = _package_spec(name)
    package = importlib.util.module_from_spec(spec)
    running = False  # while the __init__ runs (in the thread holding the lock)

    def run_init(attribute: str) -> object:
        nonlocal running
        if attribute.startswith("__") and attribute.endswith("__") and attribute != "__all__":
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        with _INIT_LOCK:
            if vars(package).get("__getattr__") is run_init:
                if running:  # asked by the __init__ itself: not there yet, as in any partial module
                    raise AttributeError(f"partially initialized module {name!r} has no attribute {attribute!r}")
                running = True
                try:
                    loader.exec_module(package)
                finally:
                    running = False
                del vars(package)["__getattr__"]
        return getattr(package, attribute)

    vars(package)["__getattr__"] = run_init
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, package)
