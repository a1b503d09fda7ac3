"""`tessera run`: the live scheduler process.

Wires the pieces together — configuration, apiserver clients (one rate-limited for writes, one for
watches), leader election, the scheduling loop, metrics and the probe endpoint — and owns the
process lifecycle: SIGTERM stops new cycles, drains in-flight bindings and evictions, writes the
Events queued so far (at most FLUSH_SECONDS), releases the lease, exits 0; a second SIGTERM/SIGINT exits at once with 1 (the Lease, if not yet released, left
to expire).
The loop, the election and the signal handling are tasks of one anyio task group (on the asyncio
event loop, or uvloop with --event-loop uvloop), all ended before the probe endpoint closes and the process exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import structlog

from scheduler.api.config import SchedulerConfig, load_config_or_report
from scheduler.api.config_effective import config_digest, configz
from scheduler.build_info import build_info
from scheduler.core.plugins.registry import gpu_scoring_notices
from scheduler.core.framework.attempt import Attempt
from scheduler.kube.apiserver_wait import ApiserverWait
from scheduler.kube.binder import BindResult
from scheduler.kube.concurrency import stop_on_signal
from scheduler.kube.recorder import FLUSH_SECONDS, ObjectRef
from scheduler.kube.http import ConnectError, KubeconfigError, KubeHttp, RateLimiter, connect, kubeconfig_path
from scheduler.kube.leader import LeaderElector, default_identity
from scheduler.kube.lone_replica import live_leader, watch_for_a_leader
from scheduler.kube.loop import LoopHooks, SchedulerLoop
from scheduler.kube.metrics import Metrics, MetricsStopwatch, PodGroupResult
from scheduler.kube.secure_serving import (ALWAYS_ALLOW_PATHS, DelegatedAuth, ServingCertificate, path_problem,
                                           tls_context)
from scheduler.kube.serving import (GPU_MAP_DATA, GPU_MAP_PAGE, PING, Check, ServeError, configz_route, serve,
                                    turned_off)
from scheduler.logs import LogSettingsError, configure_logging, describe_error
from scheduler.open_files import raise_open_files_limit
from scheduler.view.cluster import gpu_counts

log = structlog.get_logger("tessera.run")

DRAIN_SECONDS = 10.0


# every path the probe port serves (serving.HealthServer: the probes, /metrics, /configz, the map's routes)
_ENDPOINTS = (f"/healthz, /livez, /readyz, /metrics, /configz and {GPU_MAP_PAGE}, {GPU_MAP_DATA} "
              "(with --gpu-map; else they say it is off)")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run", help="run the scheduler against a Kubernetes cluster",
        description="Schedule the cluster's pods that name this scheduler (spec.schedulerName, default "
                    "tessera): watch the cluster, place pods and gangs, bind them with their GPUs in the "
                    "pod annotations. Structured logs go to stderr (TESSERA_LOG_LEVEL=debug for one line "
                    "per decision); probes and Prometheus metrics are served on --bind-address:--port.")
    parser.add_argument("--config", help="scheduler configuration (default: the built-in GPU profile, fragmentation-aware packing)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: clientConnection.kubeconfig, then $KUBECONFIG, "
                                             "then ~/.kube/config, then in-cluster)")
    parser.add_argument("--bind-address", default="127.0.0.1",
                        help=f"address for {_ENDPOINTS} (default 127.0.0.1)")
    # one server: plain HTTP on --port or HTTPS on --secure-port (argparse refuses both, naming them)
    ports = parser.add_mutually_exclusive_group()
    ports.add_argument("--port", type=_port, default=10251,
                       help=f"port for {_ENDPOINTS} (default 10251; 0 = any free port, logged in serving.started)")
    ports.add_argument("--secure-port", type=_port,
                       help="serve the same paths with HTTPS on this port instead of --port, as kube-scheduler's "
                            "10259: bearer tokens checked with TokenReviews, requests authorized with "
                            "SubjectAccessReviews (the scheduler's identity needs system:auth-delegator); "
                            "no client-certificate authentication")
    parser.add_argument("--tls-cert-file", help="with --secure-port: the serving certificate (PEM, loaded again when it "
                                                "changes; default: a self-signed one for localhost made at start)")
    parser.add_argument("--tls-private-key-file", help="with --secure-port: the --tls-cert-file's key (PEM)")
    parser.add_argument("--authorization-always-allow-paths", type=_paths, default=list(ALWAYS_ALLOW_PATHS),
                        help="with --secure-port: paths served without a SubjectAccessReview, comma-separated "
                             f"(default {','.join(ALWAYS_ALLOW_PATHS)}; a trailing * matches a prefix)")
    parser.add_argument("--identity", help="leader election identity (default: <hostname>_<uuid>)")
    parser.add_argument("--replace-default-scheduler", action="store_true",
                        help="Tessera is the cluster's only scheduler: allow the configuration to use kube-scheduler's "
                             "scheduler name (default-scheduler) or Lease (kube-system/kube-scheduler), refused "
                             "otherwise because Tessera runs beside kube-scheduler")
    parser.add_argument("--gpu-map", action="store_true",
                        help="also serve a read-only GPU map page at /gpu-map on --bind-address/--port")
    # the standard library's asyncio loop (default) or uvloop, kept to compare the two and not offered
    # in --help: uvloop's libuv can abort the process when connections are reset while their socket
    # numbers are reused, and it measured no faster here (docs/running.md, "The event loop")
    parser.add_argument("--event-loop", choices=("uvloop", "asyncio"), default="asyncio", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be 0-65535, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, not {port}")
    return port


def _paths(text: str) -> list[str]:
    paths = [path.strip() for path in text.split(",") if path.strip()]
    for path in paths:
        problem = path_problem(path)
        if problem is not None:  # kube-scheduler does not start with it either
            raise argparse.ArgumentTypeError(problem)
    return paths


def _tls_flags_problem(args: argparse.Namespace) -> str | None:
    """Why the TLS flags cannot be used as given (they mean something only with --secure-port, and
    only as a pair), or None."""
    given = [flag for flag, value in (("--tls-cert-file", args.tls_cert_file),
                                      ("--tls-private-key-file", args.tls_private_key_file)) if value is not None]
    if given and args.secure_port is None:
        return f"{' and '.join(given)} need --secure-port"
    if len(given) == 1:
        return "--tls-cert-file and --tls-private-key-file go together"
    return None


def run(args: argparse.Namespace) -> int:
    raise_open_files_limit()
    try:
        configure_logging()
    except LogSettingsError as err:
        print(f"tessera: {err}", file=sys.stderr)
        return 2
    config = load_config_or_report(args.config)
    if config is None:
        return 2
    clashes = config.kube_scheduler_clashes()
    if clashes and not args.replace_default_scheduler:
        for clash in clashes:
            print(f"tessera: refusing to run beside kube-scheduler: {config.source}: {clash}, "
                  "or pass --replace-default-scheduler if no kube-scheduler runs", file=sys.stderr)
        return 2
    if clashes:
        log.warning("tessera.replacing_kube_scheduler", config=config.source, clashes=list(clashes))
    for profile, notice in gpu_scoring_notices(config).items():
        log.warning("config.profile_scores_no_gpus", config=config.source, profile=profile, message=notice)
    if config.unused_fields:  # a ported file's settings that take no effect here, said once
        log.info("config.unused_fields", config=config.source, fields=list(config.unused_fields),
                 message="accepted for compatibility with kube-scheduler's file, not used by Tessera")
    problem = _tls_flags_problem(args)
    if problem is not None:
        print(f"tessera run: error: {problem}", file=sys.stderr)
        return 2
    tls: ssl.SSLContext | None = None
    if args.secure_port is not None:
        try:
            tls = tls_context(args.tls_cert_file, args.tls_private_key_file)
        except OSError as err:  # ssl.SSLError too: a file that cannot be read, a key that is not the cert's
            print(f"tessera: cannot serve with TLS: {describe_error(err)}", file=sys.stderr)
            return 1
    try:
        return anyio.run(_main, args, config, tls, backend="asyncio",
                         backend_options={"use_uvloop": args.event_loop == "uvloop"})
    except ConnectError as err:
        print(f"tessera: {err}", file=sys.stderr)
        return 2 if isinstance(err, KubeconfigError) else 1
    except ServeError as err:
        print(f"tessera: {err}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace, config: SchedulerConfig, tls: ssl.SSLContext | None) -> int:
    """Open the two apiserver clients (closed on every way out, so a failed start-up leaves no
    "Unclosed client session" behind) and run. Kubeconfig problems raise `ConnectError`; an
    apiserver that cannot be reached yet is waited for (`_run`)."""
    kubeconfig = kubeconfig_path(args.kubeconfig, config.client_connection.kubeconfig)
    # In a source checkout the build is read with git (~20 ms, two processes): let it run on a
    # thread while the clients connect, not on the way to the first LIST.
    reading_build = asyncio.get_running_loop().run_in_executor(None, build_info)
    async with contextlib.AsyncExitStack() as clients:
        api = await clients.enter_async_context(await connect(kubeconfig))
        watch_api = await clients.enter_async_context(await connect(kubeconfig))
        connection = config.client_connection
        http = KubeHttp(api, RateLimiter(connection.qps, connection.burst))
        await reading_build
        return await _run(args, config, http, KubeHttp(watch_api), kubeconfig, tls)


def log_starting(apiserver: str, apiserver_version: object, config: SchedulerConfig) -> None:
    """The first line of a run: which apiserver (and its version), which Tessera (version and
    commit) and which configuration (its file, digest and profiles) — what tells two replicas of a
    rolling upgrade apart."""
    build = build_info()
    log.info("tessera.starting", apiserver=apiserver, apiserver_version=apiserver_version,
             tessera_version=build.version, git_commit=build.git_commit, git_tree_state=build.git_tree_state,
             config=config.source, config_digest=config_digest(config), profiles=sorted(config.scheduler_names))


async def _run(args: argparse.Namespace, config: SchedulerConfig, http: KubeHttp, watch_http: KubeHttp,
               kubeconfig: str | None, tls: ssl.SSLContext | None = None) -> int:
    identity = args.identity or default_identity()
    election = config.leader_election
    metrics = Metrics(profiles=sorted(config.scheduler_names), lease_name=election.resource_name,
                      build=build_info(), config_digest=config_digest(config))
    http.on_result = watch_http.on_result = metrics.count_request  # rest_client_requests_total
    elector: LeaderElector | None = None
    loop_ref: list[SchedulerLoop] = []

    def started() -> None:
        metrics.set_leader(True)
        log.info("leader.started", identity=identity)
        if loop_ref:
            uid = elector.lease_uid if elector is not None else ""
            loop_ref[0].leadership_started(ObjectRef("Lease", "coordination.k8s.io/v1", election.resource_name,
                                                     election.resource_namespace, uid))

    stepping_down = False  # the shutdown gives the Lease up: leading stops by plan, not by a loss

    def stopped() -> None:
        metrics.set_leader(False)
        if stepping_down:
            log.info("leader.stopped", identity=identity, reason="shutdown")
        else:
            log.warning("leader.stopped", identity=identity)
        if loop_ref:
            loop_ref[0].lost_leadership()

    def resumed() -> None:  # a doubt settled by a Lease write (LeaderElector.saw_term): act again now
        if loop_ref:
            loop_ref[0].wake()

    def takes_over_within() -> float:
        assert elector is not None  # asked by the elector's own callback
        return elector.takes_over_within()

    def unrenewed_for() -> float | None:
        assert elector is not None  # asked by the elector's own callback
        return elector.unrenewed_for()

    if election.leader_elect:
        elector = LeaderElector(http, namespace=election.resource_namespace, name=election.resource_name,
                                identity=identity, lease_duration=election.lease_duration_seconds,
                                renew_deadline=election.renew_deadline_seconds,
                                retry_period=election.retry_period_seconds,
                                on_started_leading=started, on_stopped_leading=stopped,
                                on_resumed=resumed, config_digest=config_digest(config),
                                on_new_leader=standing_by(identity, f"{election.resource_namespace}/{election.resource_name}",
                                                          takes_over_within, unrenewed_for))
    else:
        metrics.set_leader(True)

    loop = SchedulerLoop(config, http, watch_http, identity=identity,
                         leader_term=(lambda: elector.term) if elector is not None else lambda: 0,
                         term_fence=(lambda: elector.fence_token) if elector is not None else lambda: None,
                         on_term_seen=elector.saw_term if elector is not None else lambda token, pod: False,
                         other_lease=elector.other_lease if elector is not None else lambda token: None,
                         stopwatch=MetricsStopwatch(metrics))
    if elector is None:
        loop.leadership_started()  # one term, from the start: before the informers list
    loop.hooks = MetricsHooks(metrics, loop)
    routes = turned_off((GPU_MAP_PAGE, GPU_MAP_DATA), "the GPU map is off: start tessera run with --gpu-map")
    if args.gpu_map:
        # imported only when asked for: the page's view model is not on the way to the first Binding
        from scheduler.kube.gpu_map import GpuMap

        gpu_map = GpuMap(loop)
        loop.hooks = gpu_map.hooks(loop.hooks)
        routes = gpu_map.routes()
    metrics.on_scrape(StateGauges(loop, metrics))
    if elector is not None:
        metrics.on_scrape(count_slow_renewals(elector, metrics))
    loop_ref.append(loop)

    stop = anyio.Event()  # set by a signal or a crashed task: the process is shutting down
    crashed: list[str] = []
    forced = anyio.CancelScope()  # cancelled by a second signal: stop waiting for the graceful shutdown
    signals = 0

    def on_signal() -> None:
        """The first SIGTERM/SIGINT starts the graceful shutdown; a second one ends it at once with
        exit 1, as kube-scheduler's (k8s.io/apiserver `SetupSignalHandler`). Whatever the shutdown
        had not done yet is skipped: a Lease not yet released is left to expire, so Bindings cut
        here can never land on devices a successor handed out."""
        nonlocal signals
        signals += 1
        if signals == 1:
            stop.set()
            return
        if not forced.cancel_called:
            log.warning("tessera.forced_exit", message="second signal: exiting at once without finishing the "
                        "graceful shutdown; the Lease, if not released yet, is left to expire")
        forced.cancel()

    async def release_lease() -> None:
        nonlocal stepping_down
        stepping_down = True
        assert elector is not None
        await elector.release()

    async def until_stop(name: str, work: Callable[[], Awaitable[None]]) -> None:
        """A part the process cannot go on without: when it ends (a crash: exit 1), shut down."""
        try:
            await work()
        except Exception as err:
            log.error("tessera.task_failed", task=name, error=describe_error(err))
            crashed.append(name)
        finally:
            stop.set()

    # serve() outside the task group: a port that cannot be bound is its own error, not a group's
    waiting = ApiserverWait()
    port, middlewares = args.port, []
    if tls is not None:
        port = args.secure_port
        middlewares = [DelegatedAuth(http, always_allow_paths=args.authorization_always_allow_paths).middleware]
    async with serve(args.bind_address, port, healthz=_healthz_checks(loop, waiting),
                     readyz=_readyz_checks(loop, waiting), registry=metrics.registry,
                     routes=[*routes, configz_route(configz(config))], tls=tls, middlewares=middlewares,
                     port_flag="--port" if tls is None else "--secure-port") as server:
        log.info("tessera.serving", url=server.url, identity=identity,
                 gpu_map=f"{server.url}/gpu-map" if args.gpu_map else "off (start with --gpu-map)")
        refused: ConnectError | None = None  # raised here it would leave the groups as an exception group
        async with anyio.create_task_group() as group:
            await group.start(stop_on_signal, on_signal, name="signals")
            if tls is not None and args.tls_cert_file is not None:  # a rotated Secret is served without a restart
                group.start_soon(ServingCertificate(tls, args.tls_cert_file, args.tls_private_key_file).run,
                                 name="serving-certificate")
            try:
                refusal = await _until_answered(waiting, http, kubeconfig, config, stop) if not stop.is_set() else 0
            except ConnectError as err:  # a certificate the kubeconfig does not trust: one line, no wait
                refused, refusal = err, 1
            if refusal is not None:  # stopped while waiting, refusing to run, or refused: nothing was started
                group.cancel_scope.cancel()
            else:
                group.start_soon(until_stop, "loop", loop.run, name="loop")
                if elector is not None:
                    group.start_soon(until_stop, "leader-election", elector.run, name="leader-election")
                else:
                    group.start_soon(functools.partial(
                        watch_for_a_leader, http, namespace=election.resource_namespace, name=election.resource_name,
                        retry_period=election.retry_period_seconds, every=election.lease_duration_seconds),
                        name="lease-watch")
                with forced:
                    await stop.wait()
                    log.info("tessera.stopping", in_flight=loop.in_flight)
                    await step_down(loop.stop, loop.drain, lambda: loop.in_flight,
                                    release_lease if elector is not None else None, crashed=bool(crashed),
                                    flush=loop.events.flush)
                stepping_down = True  # a Lease left to expire (Bindings in flight) ends with the cancel
                group.cancel_scope.cancel()  # the loop (with what the drain did not see through), the signal handlers
        if refused is not None:
            raise refused
        if refusal:  # refusing to run (or refused): nothing was started, stderr says why
            return refusal
    log.info("tessera.stopped")  # also after a signal that came before anything was started (refusal 0)
    return 1 if crashed or forced.cancel_called else 0


async def _until_answered(waiting: ApiserverWait, http: KubeHttp, kubeconfig: str | None,
                          config: SchedulerConfig, stop: anyio.Event) -> int | None:
    """Wait for the apiserver (`ApiserverWait`: as long as it takes), log the run's first line, and
    check no other replica leads when this one runs without leader election (`_before_start`). A
    SIGTERM ends any of it at once, the Lease check included (it can watch a Lease for the
    holder's whole lease duration). None: go on and schedule; else the exit code (0 when a signal
    came first)."""
    outcome: int | None = 0  # stays 0 when the stop cancels the checks
    failed: ConnectError | None = None
    async with anyio.create_task_group() as group:
        async def until_stopped() -> None:
            await stop.wait()
            group.cancel_scope.cancel()

        group.start_soon(until_stopped)
        try:  # raised inside the group it would leave it wrapped in an exception group
            outcome = await _before_start(waiting, http, kubeconfig, config)
        except ConnectError as err:  # a certificate the kubeconfig does not trust: no reason to wait
            failed = err
        group.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return outcome


async def _before_start(waiting: ApiserverWait, http: KubeHttp, kubeconfig: str | None,
                        config: SchedulerConfig) -> int | None:
    """`_until_answered`'s steps, all cancelled by a signal: None to go on, else the exit code."""
    version = await waiting.until_answered(http, kubeconfig)
    # 401/403 is not fatal: the informers retry, say why once and /readyz gives the reason.
    log_starting(str(http.api.configuration.host), (version.json() or {}).get("gitVersion") if version.ok else None,
                 config)
    election = config.leader_election
    if election.leader_elect:
        return None
    lease = f"{election.resource_namespace}/{election.resource_name}"
    log.warning("leader_election.disabled", lease=lease,
                message="leaderElect is false: this replica schedules without a Lease; run exactly one")
    try:
        holder = await live_leader(http, namespace=election.resource_namespace, name=election.resource_name,
                                   retry_period=election.retry_period_seconds)
    except Exception as err:  # noqa: BLE001 - a transport error: it cannot tell, as when the Lease may not be read
        log.warning("leader_election.lease_unreadable", lease=lease, error=describe_error(err))
        holder = None  # `watch_for_a_leader` looks again while it runs
    if holder is None:
        return None
    print(f"tessera: refusing to run: leaderElect is false, and {holder} leads through the Lease {lease}: "
          "both would schedule the same pods and could give one GPU to two pods. Stop that replica, "
          "or run this one with leader election on (it then stands by)", file=sys.stderr)
    return 2


def standing_by(identity: str, lease: str, takes_over_within: Callable[[], float],
                unrenewed_for: Callable[[], float | None]) -> Callable[[str], None]:
    """The elector's `on_new_leader`: a standby says once per leader that it stands by, and for
    whom (a new user's trial found a second replica that logged only `leader.observed … me: false`
    and then "scheduling starts (if leading)"), when it takes over at the latest should that
    leader renew the Lease no more (`LeaderElector.takes_over_within`: a replica restarted after
    `kill -9` was silent for ~15 s, its log naming the dead holder as leader), and how long the
    leader's record has gone unrenewed by this host's clock (`LeaderElector.unrenewed_for`, in
    `leader.acquired`'s field name: a re-trial read the dead holder's line as a live leader's)."""
    def said(holder: str) -> None:
        if holder and holder != identity:
            within = takes_over_within()
            unrenewed = unrenewed_for()
            # not :g, which reads weeks as 2e+06 (a Lease outlives an uninstall); 3, not 3.0, as :g
            seconds = f"{unrenewed:.1f}".removesuffix(".0") if unrenewed is not None else ""
            stale = f" (its Lease unrenewed for {seconds} s by this host's clock)" if unrenewed is not None else ""
            log.info("leader.standing_by", holder=holder, lease=lease, takes_over_within_seconds=within,
                     unrenewed_for_seconds=unrenewed,
                     message=f"{holder} leads{stale}: this replica keeps its cache warm and schedules only if it "
                             f"takes over, at the latest in {within:g} s if {holder} renews the Lease no more")
    return said


async def step_down(stop: Callable[[], None], drain: Callable[[float], Awaitable[bool]], in_flight: Callable[[], int],
                    release: Callable[[], Awaitable[object]] | None, *, drain_seconds: float = DRAIN_SECONDS,
                    crashed: bool = False, flush: Callable[[float], Awaitable[bool]] | None = None,
                    flush_seconds: float = FLUSH_SECONDS) -> None:
    """Stop deciding, let the Bindings and evictions in flight settle, write the Events queued so
    far (`flush`, at most `flush_seconds`: the term still leads, so they are its own to send; once
    the Lease is released they would be dropped), then hand the Lease over —
    only if none is left (client-go's `ReleaseOnCancel`: all code the lease guards must have
    completed first). A Binding still out may land after a successor has given its pod's devices
    to another pod, an eviction after the successor decided that preemption afresh; the Lease is
    then left to expire, so the successor waits `leaseDuration` (by then the apiserver has
    answered or dropped the request) instead of taking over at once. After a crash it is left to
    expire too: the crashed loop's writes were cancelled mid-request, so none counts as in flight,
    yet any may still land. A crash during the drain is caught by `drain` itself, which never
    counts a write cut short as settled."""
    stop()
    drained = await drain(drain_seconds)
    if flush is not None:
        await flush(flush_seconds)
    if release is None:
        return
    if crashed:
        log.warning("leader.release_skipped", in_flight=in_flight(),
                    message="a part of the scheduler crashed, cutting any Binding it had out: the Lease is "
                            "left to expire instead of being handed over")
        return
    if not drained:
        left = in_flight()
        why = f"Bindings or evictions still in flight after {drain_seconds:g} s" if left else \
            "a Binding or an eviction was cut short mid-request"
        log.warning("leader.release_skipped", in_flight=left,
                    message=f"{why}: the Lease is left to expire instead of being handed over")
        return
    try:
        await release()
    except Exception as err:  # shutting down either way; the Lease then expires
        log.warning("leader.release_failed", error=describe_error(err))


def _healthz_checks(loop: SchedulerLoop, waiting: ApiserverWait) -> list[Check]:
    """`scheduling-loop` passes while the process waits for the apiserver: an apiserver that is
    down is no reason for the kubelet to restart the scheduler (which would only wait again)."""
    def scheduling_loop() -> str | None:
        if waiting.reason is not None or loop.healthy:
            return None
        return "the scheduling loop is not running"

    return [PING, ("scheduling-loop", scheduling_loop)]


def _readyz_checks(loop: SchedulerLoop, waiting: ApiserverWait) -> list[Check]:
    """kube-scheduler's readiness: `shutdown` from SIGTERM on, and the informers' initial lists
    (`informer-sync`), with the apiserver's refusal as the reason while it refuses us. Tessera's
    own: `term-fence`, failing while a leader cannot write its term fence (it schedules nothing
    meanwhile: a webhook or a policy refusing pods/status writes, RBAC without pods/status)."""
    def informers() -> str | None:
        if loop.informers.synced:
            return None
        return waiting.reason or loop.informers.denied or "informers have not finished their initial list"

    def term_fence() -> str | None:
        error = loop.fence_error
        if error is None:
            return None
        return (f"the leader schedules nothing until it has fenced {loop.fence_pending} more pod(s); "
                f"the last write failed: {error}")

    return [("shutdown", lambda: "the process is shutting down" if loop.stopping else None),
            ("informer-sync", informers), ("term-fence", term_fence)]


def pod_group_result(attempts: list[Attempt]) -> PodGroupResult | None:
    """What a cycle is to `scheduler_podgroup_schedule_attempts_total`: kube-scheduler's result of
    a pod group cycle (schedule_one_podgroup.go submitPodGroupAlgorithmResult) — "scheduled" when
    the gang was placed, "waiting_on_preemption" when it did not fit and its preemption chose
    victims, "unschedulable" when it did not fit otherwise, "error" when the cycle erred. None for
    a cycle that is no pod group attempt: a plain pod's (a gang-labelled pod in a profile without
    gang scheduling is one), and a gang's that could not be tried yet ("waiting": fewer than
    minMember members present, or no PodGroup), which upstream never starts, its pods gated at
    PreEnqueue; such a member's attempt is an ordinary unschedulable one."""
    outcome = attempts[0].gang_outcome if attempts else None
    if outcome is None or outcome == "waiting":
        return None
    if any(attempt.error for attempt in attempts):
        return "error"
    if outcome == "placed":
        return "scheduled"
    return "waiting_on_preemption" if any(attempt.preempted for attempt in attempts) else "unschedulable"


class MetricsHooks(LoopHooks):
    """Feeds the loop's observations into the Prometheus metrics."""

    def __init__(self, metrics: Metrics, loop: SchedulerLoop) -> None:
        self.metrics = metrics
        self.loop = loop

    def on_attempt(self, result: str, profile: str, seconds: float, attempt: Attempt) -> None:
        outcome: Literal["scheduled", "unschedulable", "error"] = \
            "scheduled" if result == "scheduled" else "error" if result == "error" else "unschedulable"
        self.metrics.observe_attempt(outcome, profile, seconds)
        if result == "scheduled":
            self.metrics.observe_pod_scheduled(attempt.attempts, max(0.0, time.time() - attempt.queued_at))
        if attempt.preemption_tried:
            self.metrics.observe_preemption(len(attempt.preempted))

    def on_cycle(self, attempts: list[Attempt], seconds: float) -> None:
        """The algorithm's time once per attempt, each member of a gang its share of the gang's
        cycle; and a gang's cycle, however many members it tried, as one pod group attempt
        (`pod_group_result`) with the cycle's time, where kube-scheduler's podGroupCycle observes
        its pod group metrics (schedule_one_podgroup.go)."""
        for _ in attempts:
            self.metrics.observe_algorithm(seconds / len(attempts))
        result = pod_group_result(attempts)
        if result is not None:
            self.metrics.observe_pod_group_algorithm(seconds)
            self.metrics.observe_pod_group_attempt(result, attempts[0].pod.scheduler_name, seconds)

    def on_bind(self, result: BindResult, redecided: bool = False) -> None:
        self.metrics.observe_binding("outdated" if redecided else result.counted_as, result.seconds)

    def on_permit_wait(self, result: str, seconds: float) -> None:
        self.metrics.observe_permit_wait(result, seconds)

    def on_queue(self, counts: dict[str, int], incoming: dict[tuple[str, str], int]) -> None:
        self.metrics.set_pending({k: v for k, v in counts.items() if k != "inFlight"})
        for (queue, event), count in incoming.items():
            self.metrics.pod_incoming(queue, event, count)


def count_slow_renewals(elector: LeaderElector, metrics: Metrics) -> Callable[[], None]:
    """The scrape hook that brings leader_election_slowpath_total up to the elector's count."""
    return lambda: metrics.count_slow_renewals(elector.slow_renewals)


class StateGauges:
    """Sets the gauges that mirror the loop's state (cache size, GPUs by model and state, silent
    node agents, unschedulable pods by plugin, Bindings held or in flight, informer sync, relists and
    kinds treated as empty) from that state, on every scrape (`Metrics.on_scrape`): they agree with /readyz the moment it says
    ready, at no cost between scrapes. The GPU counts are the view's summary (`gpu_counts`: each
    GPU classified as `kubectl tessera nodes` and the GPU map show it, without building their
    view), so the metric and the views agree."""

    def __init__(self, loop: SchedulerLoop, metrics: Metrics, clock: Callable[[], float] = time.time) -> None:
        self.loop = loop
        self.metrics = metrics
        self.clock = clock

    def __call__(self) -> None:
        core = self.loop.core
        metrics = self.metrics
        sizes = core.cache_sizes()
        metrics.set_cache_size(nodes=sizes["nodes"], pods=sizes["pods"], assumed_pods=sizes["assumed_pods"])
        held = core.held()
        now = self.clock()
        counts = gpu_counts(core, now=now, held=held)  # one walk over the nodes for both
        metrics.set_gpus(counts)
        metrics.set_agents_silent(counts.agents_silent)
        metrics.set_unschedulable_pods(core.unschedulable_by_plugin())
        metrics.set_waiting_for_allocation(len(held))
        metrics.set_binding(len(held) + self.loop.binder.in_flight)
        metrics.set_fence_pending(self.loop.fence_pending)
        for lease, writes in self.loop.conflicting.writes.items():
            metrics.count_conflicting_writes(lease, writes)
        for kind, stats in self.loop.informers.stats().items():
            metrics.count_relists(kind, stats.relists)
        for informer in self.loop.informers.informers:
            metrics.set_informer_synced(informer.kind.label, informer.synced.is_set())
            metrics.set_informer_relist_pending(informer.kind.label, informer.relist_pending)
            metrics.set_informer_unavailable(informer.kind.label, informer.unavailable)
