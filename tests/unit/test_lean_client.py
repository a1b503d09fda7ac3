"""kubernetes-asyncio imported for its connection only (scheduler/kube/lean_client.py).

Each check runs in a fresh interpreter: what matters is which modules an import leaves behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_http_layer_does_not_import_the_generated_models_or_apis() -> None:
    """Before, `import scheduler.kube.http` imported ~860 kubernetes_asyncio modules (the package
    __init__ pulls in every model and API class): a third of `tessera run`'s import time."""
    result = _run("""
        import json, sys
        import scheduler.kube.http
        loaded = [m for m in sys.modules if m.startswith('kubernetes_asyncio')]
        print(json.dumps({'count': len(loaded),
                          'models': [m for m in loaded if m.startswith('kubernetes_asyncio.client.models.')],
                          'apis': [m for m in loaded if m.startswith('kubernetes_asyncio.client.api.')]}))
    """)
    assert result["models"] == []
    assert result["apis"] == []
    assert isinstance(result["count"], int) and result["count"] < 60


def test_a_connection_is_made_from_a_kubeconfig_with_the_library_loader(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(textwrap.dedent("""
        apiVersion: v1
        kind: Config
        clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]
        users: [{name: u, user: {token: secret-token}}]
        contexts: [{name: x, context: {cluster: c, user: u}}]
        current-context: x
    """))
    result = _run(f"""
        import asyncio, json, sys
        from scheduler.kube.http import connect

        async def main():
            api = await connect({str(kubeconfig)!r})
            async with api:
                token = api.configuration.api_key.get('BearerToken') or api.configuration.api_key.get('authorization')
                return {{'host': api.configuration.host, 'token': token, 'agent': api.user_agent,
                         'models': 'kubernetes_asyncio.client.models.v1_pod' in sys.modules}}
        print(json.dumps(asyncio.run(main())))
    """)
    assert result["host"] == "http://127.0.0.1:1"
    assert result["token"] == "Bearer secret-token"
    assert str(result["agent"]).startswith("tessera/")
    assert result["models"] is False


def test_the_typed_client_is_still_there_for_code_that_asks_for_it() -> None:
    """The packages run their real __init__ on the first attribute they lack: the e2e tests'
    `client.CoreV1Api`, ApiClient's deserialising into a model, `kubernetes_asyncio.watch`."""
    result = _run("""
        import asyncio, json
        import scheduler.kube.http
        import kubernetes_asyncio
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.api_client import ApiClient

        async def deserialise():
            async with ApiClient() as api:
                return api._ApiClient__deserialize({'metadata': {'name': 'p'}}, 'V1Pod')
        pod = asyncio.run(deserialise())
        print(json.dumps({'api': client.CoreV1Api.__name__, 'same_api_client': client.ApiClient is ApiClient,
                          'pod': type(pod).__name__, 'name': pod.metadata.name,
                          'watch': kubernetes_asyncio.watch.Watch.__name__}))
    """)
    assert result == {"api": "CoreV1Api", "same_api_client": True, "pod": "V1Pod", "name": "p", "watch": "Watch"}


def test_the_dynamic_client_and_the_package_metadata_import_as_before() -> None:
    """`dynamic.discovery` imports `kubernetes_asyncio.__version__`: with the top-level package
    deferred too (the first version of this), that ran its __init__ half-way through the dynamic
    client's own import and left the package broken."""
    result = _run("""
        import json, sys
        import scheduler.kube.http
        import kubernetes_asyncio
        from kubernetes_asyncio.dynamic import DynamicClient
        from kubernetes_asyncio.watch import Watch
        print(json.dumps({'version': kubernetes_asyncio.__version__, 'dynamic': DynamicClient.__name__,
                          'watch': Watch.__name__,
                          'models': any(m.startswith('kubernetes_asyncio.client.models.') for m in sys.modules)}))
    """)
    assert result == {"version": "36.1.0", "dynamic": "DynamicClient", "watch": "Watch", "models": False}


def test_threads_asking_for_the_typed_client_at_once_all_get_it() -> None:
    """The deferred __init__ runs once, under a lock; before, the threads that came while it ran
    got AttributeError (the hook was already gone, the attribute not there yet)."""
    result = _run("""
        import json, threading
        import scheduler.kube.http
        from kubernetes_asyncio import client
        got, failed = [], []
        start = threading.Barrier(8)

        def ask():
            start.wait()
            try:
                got.append((client.CoreV1Api.__name__, client.V1Pod.__name__))
            except Exception as err:
                failed.append(repr(err))
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps({'got': len(got), 'failed': failed}))
    """)
    assert result == {"got": 8, "failed": []}


def test_a_dunder_lookup_does_not_load_the_typed_client() -> None:
    """`warnings` and unittest look `__warningregistry__` up on every module."""
    result = _run("""
        import json, sys
        import scheduler.kube.http
        from kubernetes_asyncio import client
        registry = getattr(client, '__warningregistry__', None)
        print(json.dumps({'registry': registry,
                          'models': any(m.startswith('kubernetes_asyncio.client.models.') for m in sys.modules)}))
    """)
    assert result == {"registry": None, "models": False}


def test_a_failed_deferred_init_is_tried_again_on_the_next_access() -> None:
    result = _run("""
        import json, sys
        import scheduler.kube.http
        from kubernetes_asyncio import client
        sys.modules['kubernetes_asyncio.client.models.v1_pod'] = None  # this model cannot be imported
        try:
            client.V1Pod
        except ImportError as err:
            first = type(err).__name__
        del sys.modules['kubernetes_asyncio.client.models.v1_pod']
        print(json.dumps({'first': first, 'then': client.V1Pod.__name__, 'api': client.CoreV1Api.__name__}))
    """)
    assert result == {"first": "ModuleNotFoundError", "then": "V1Pod", "api": "CoreV1Api"}


def test_a_failure_while_importing_the_connection_parts_leaves_nothing_behind() -> None:
    result = _run("""
        import json, sys
        sys.modules['kubernetes_asyncio.client.rest'] = None  # the REST client cannot be imported
        try:
            import scheduler.kube.http
        except ImportError as err:
            failed = type(err).__name__
        left = sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio'))
        import kubernetes_asyncio.client
        print(json.dumps({'failed': failed, 'left': left, 'api': kubernetes_asyncio.client.CoreV1Api.__name__}))
    """)
    assert result == {"failed": "ModuleNotFoundError", "left": [], "api": "CoreV1Api"}


def test_nothing_changes_when_the_library_was_imported_first() -> None:
    result = _run("""
        import json, sys
        import kubernetes_asyncio
        before = len([m for m in sys.modules if m.startswith('kubernetes_asyncio')])
        import scheduler.kube.http
        from kubernetes_asyncio import client
        after = len([m for m in sys.modules if m.startswith('kubernetes_asyncio')])
        print(json.dumps({'same': before == after, 'api': client.CoreV1Api.__name__,
                          'has_getattr': '__getattr__' in vars(client)}))
    """)
    assert result == {"same": True, "api": "CoreV1Api", "has_getattr": False}
