"""`python -m bench.live_raw PLAN.json`: the raw binder, `bench.live`'s throughput ceiling.

It makes no decisions: the plan already says which pod goes to which node (round-robin over the
nodes, never more pods than GPUs), and this process only POSTs those Bindings, `concurrency` at a
time, with no client-side rate limit, as fast as the apiserver accepts them. It runs as its own
process, like the two schedulers, so it pays the same start-up and gets its own core share.

Plan: `{"server", "ca_file", "token_file", "namespace", "concurrency", "events", "bindings": [[pod, node], ...]}`.
With `"events": true` (the `raw-binder+events` contestant) each Binding is followed by one
`Scheduled` Event (events.k8s.io/v1), the second write per pod both real schedulers make, so the
apiserver does the same writes as for them.
Exit status 0 when every Binding got 201, 1 otherwise (the failures are printed).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import aiohttp
import orjson


async def bind_all(plan: dict[str, object]) -> tuple[int, list[str]]:
    token = Path(str(plan["token_file"])).read_text().strip()
    namespace = str(plan["namespace"])
    concurrency = int(plan["concurrency"])  # type: ignore[call-overload]
    bindings = [(str(pod), str(node)) for pod, node in plan["bindings"]]  # type: ignore[attr-defined]
    with_events = bool(plan.get("events"))
    context = ssl.create_default_context(cafile=str(plan["ca_file"]))
    server = str(plan["server"]).rstrip("/")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", "Content-Type": "application/json"}
    failures: list[str] = []
    bound = 0
    iterator = iter(bindings)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=concurrency),
                                     headers=headers, trust_env=False) as session:

        async def worker() -> None:
            nonlocal bound
            for pod, node in iterator:
                body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                                     "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
                url = f"{server}/api/v1/namespaces/{namespace}/pods/{pod}/binding"
                for attempt in range(5):
                    async with session.post(url, data=body) as response:
                        raw = await response.read()
                        if response.status == 201:
                            bound += 1
                            if with_events:
                                await _event(session, server, namespace, pod, node, failures)
                            break
                        if response.status in (429, 500, 503, 504) and attempt < 4:
                            await asyncio.sleep(0.1 * (attempt + 1))
                            continue
                        failures.append(f"{pod} -> {node}: HTTP {response.status} {raw[:200].decode(errors='replace')}")
                        break

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bindings))))))
    return bound, failures


async def _event(session: aiohttp.ClientSession, server: str, namespace: str, pod: str, node: str,
                 failures: list[str]) -> None:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body = orjson.dumps({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": f"{pod}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "eventTime": now, "reportingController": "raw-binder", "reportingInstance": "raw-binder",
        "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": f"Successfully assigned {namespace}/{pod} to {node}",
        "regarding": {"kind": "Pod", "apiVersion": "v1", "name": pod, "namespace": namespace},
    })
    async with session.post(f"{server}/apis/events.k8s.io/v1/namespaces/{namespace}/events", data=body) as response:
        raw = await response.read()
        if response.status != 201:
            failures.append(f"event for {pod}: HTTP {response.status} {raw[:200].decode(errors='replace')}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.live_raw PLAN.json", file=sys.stderr)
        return 2
    plan = orjson.loads(Path(args[0]).read_bytes())
    bound, failures = asyncio.run(bind_all(plan))
    print(f"raw binder: {bound} bound, {len(failures)} failed", flush=True)
    for failure in failures[:20]:
        print(failure, flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
