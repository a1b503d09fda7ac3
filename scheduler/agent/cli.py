"""`tessera agent`: the node agent, one per GPU node (deploy/agent/daemonset.yaml).

Start-up problems (no or unusable kubeconfig, an unreachable apiserver or one that rejects our
credentials, an unusable device-plugin directory, NVML missing, a broken fake-device file) are one
line on stderr and a non-zero exit (2 for a kubeconfig problem, as for bad arguments), so the
DaemonSet's pod shows them in its status. After start-up nothing but SIGTERM/SIGINT ends the
process: API and kubelet trouble is retried (see scheduler/agent/agent.py). SIGTERM stops the
device-plugin servers and removes their sockets; the ExtendedResources stay published.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

import anyio
import structlog

from scheduler.agent.agent import DEFAULT_RESOURCE_NAME, STATE_FILE, Agent, AgentOptions
from scheduler.agent.devices import BackendError, DeviceBackend, FakeBackend
from scheduler.agent.plugin import socket_dir_ok
from scheduler.core.classes import validate_resource_name
from scheduler.kube.concurrency import stop_on_signal
from scheduler.kube.apiserver_wait import ApiserverWait
from scheduler.kube.http import (AGENT_USER_AGENT, ConnectError, KubeconfigError, KubeHttp, RateLimiter,
                                 connect, kubeconfig_path, rejected)
from scheduler.logs import LogSettingsError, configure_logging

log = structlog.get_logger("tessera.agent")

DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "agent", help="run the node agent: publish this node's GPUs and serve the kubelet device-plugin API",
        description="Publish this node's GPUs as ExtendedResources (NVML, or a fake device file), serve the "
                    "kubelet's device-plugin API and hand each pod the GPUs the scheduler chose for it "
                    "(the tessera.dev/devices annotation); runs as a DaemonSet.")
    parser.add_argument("--node-name", required=True, help="this node's name (the DaemonSet passes spec.nodeName)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the "
                                             "in-cluster service account, which the DaemonSet uses)")
    parser.add_argument("--backend", choices=("nvml", "fake"), default="nvml",
                        help="device discovery: NVML (default) or a file (--fake-devices)")
    parser.add_argument("--fake-devices", metavar="FILE",
                        help="YAML/JSON list of devices for --backend fake (re-read every few seconds)")
    parser.add_argument("--device-plugin-dir", default=DEFAULT_PLUGIN_DIR,
                        help=f"the kubelet's device-plugin directory (default {DEFAULT_PLUGIN_DIR})")
    parser.add_argument("--heartbeat-seconds", type=float, default=30.0,
                        help="how often device status is written (default 30)")
    parser.add_argument("--resource-name", default=DEFAULT_RESOURCE_NAME,
                        help=f"spec.resourceName of the published devices (default {DEFAULT_RESOURCE_NAME})")
    parser.add_argument("--cdi", action="store_true",
                        help="also return CDI device names nvidia.com/gpu=<uuid> from Allocate "
                             "(needs `nvidia-ctk cdi generate --device-name-strategy=uuid` on the node)")
    parser.add_argument("--state-file", help=f"ledger of served containers and the slots the kubelet gave them (default <device-plugin-dir>/{STATE_FILE}; "
                                             "'' keeps it in memory only)")
    parser.add_argument("--qps", type=float, default=5.0, help="apiserver write rate limit (default 5)")
    parser.add_argument("--burst", type=int, default=10, help="apiserver write burst (default 10)")
    parser.set_defaults(func=run)


def _fail(message: str, code: int = 2) -> int:
    print(f"tessera agent: {message}", file=sys.stderr)
    return code


def make_backend(args: argparse.Namespace) -> DeviceBackend:
    """The configured backend, checked once so start-up errors surface now, not in a loop."""
    if args.backend == "fake":
        backend: DeviceBackend = FakeBackend(args.fake_devices)
    else:
        from scheduler.agent.nvml import NvmlBackend

        backend = NvmlBackend()
    backend.discover()
    return backend


def run(args: argparse.Namespace) -> int:
    try:
        configure_logging()
    except LogSettingsError as err:
        return _fail(str(err))
    if args.heartbeat_seconds <= 0:
        return _fail("--heartbeat-seconds must be positive")
    problem = validate_resource_name(args.resource_name)
    if problem is not None:
        return _fail(f"--resource-name: {problem}")
    if args.backend == "fake" and not args.fake_devices:
        return _fail("--backend fake needs --fake-devices FILE")
    plugin_dir = Path(args.device_plugin_dir)
    problem = socket_dir_ok(plugin_dir)
    if problem is not None:
        return _fail(problem, 1)
    try:
        backend = make_backend(args)
    except BackendError as err:
        return _fail(str(err), 1)
    state_file: Path | None = plugin_dir / STATE_FILE
    if args.state_file is not None:
        state_file = Path(args.state_file) if args.state_file else None
    options = AgentOptions(node_name=args.node_name, device_plugin_dir=plugin_dir, resource_name=args.resource_name,
                           heartbeat_seconds=args.heartbeat_seconds, cdi=args.cdi, state_file=state_file)
    try:
        return anyio.run(_main, args, options, backend)
    except ConnectError as err:
        backend.close()  # the agent never started, so it did not close it
        return _fail(str(err), 2 if isinstance(err, KubeconfigError) else 1)


async def _main(args: argparse.Namespace, options: AgentOptions, backend: DeviceBackend) -> int:
    """Connect (both clients closed on every way out), wait for the apiserver (a DaemonSet pod
    often starts before it answers: `ApiserverWait`), check it takes our credentials, then run
    until SIGTERM/SIGINT. Kubeconfig problems and a 401/403 raise `ConnectError`."""
    kubeconfig = kubeconfig_path(args.kubeconfig)
    async with contextlib.AsyncExitStack() as clients:
        api = await clients.enter_async_context(await connect(kubeconfig, user_agent=AGENT_USER_AGENT))
        watch_api = await clients.enter_async_context(await connect(kubeconfig, user_agent=AGENT_USER_AGENT))
        http = KubeHttp(api, RateLimiter(args.qps, args.burst))
        agent: Agent | None = None
        refused: ConnectError | None = None
        async with anyio.create_task_group() as group:  # a signal cancels it: the agent cleans up and ends
            await group.start(stop_on_signal, group.cancel_scope.cancel, name="signals")
            try:  # raised past the group it would reach main() wrapped in an exception group
                response = await ApiserverWait().until_answered(http, kubeconfig)
            except ConnectError as err:  # e.g. a certificate the kubeconfig does not trust
                refused = err
            else:
                if response.status in (401, 403):
                    refused = ConnectError(rejected(http, response))
            if refused is not None:
                group.cancel_scope.cancel()
            else:
                agent = Agent(options, http, KubeHttp(watch_api), backend)
                await agent.run()
        if agent is None and refused is None:  # a signal during the wait: the agent never started
            backend.close()  # so it did not close it, nor say it stopped, as every other shutdown does
            log.info("agent.stopped", node=options.node_name)
        if refused is not None:
            raise refused
    return 0
