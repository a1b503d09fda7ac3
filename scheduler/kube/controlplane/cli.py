"""``tessera dev-cluster``: a local control plane for trying Tessera by hand.

Why a CLI command and not a script: a user who wants to see the scheduler work needs a cluster,
and on machines without Docker/kind the only one available is the local control plane the tests
use. The command prints ``ready: <kubeconfig>`` on stdout once the plane is up (so scripts can
wait for that line), keeps running until SIGINT/SIGTERM/SIGHUP, and then stops every process it started.
Killed outright (SIGKILL), it cannot: its processes then die by their parent-death signal
(``ManagedProcess``). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from scheduler.core.objects import is_label_value
from scheduler.api.quantity import QuantityError, parse_quantity

from .binaries import K8S_VERSION, BinariesNotFound, build_script, default_bin_dir
from .cluster import LocalControlPlane
from .fakenodes import DEFAULT_GPU_MEMORY, fake_nodes, gpu_memory, models_in_turn
from .processes import ProcessStartError

__all__ = ["add_parser", "run"]

log = logging.getLogger("scheduler.kube.devcluster")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dev-cluster`` on an ``argparse`` subparsers object; sets ``func=run``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dev-cluster",
        help="run a local etcd + kube-apiserver with fake GPU nodes",
        description=(
            "Start a local Kubernetes control plane (etcd, kube-apiserver, optionally "
            "kube-controller-manager and kube-scheduler) with Tessera's CRDs and fake GPU nodes. "
            "Prints 'ready: <kubeconfig>' on stdout, then runs until interrupted; SIGUSR1 restarts "
            "kube-apiserver alone on the same address (etcd keeps the data)."
        ),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="working directory for certificates, etcd data, logs and the kubeconfig; one "
        "dev-cluster at a time (default: a temporary directory, removed on a clean exit and kept "
        "for inspection after a failure)",
    )
    parser.add_argument("--nodes", type=int, default=0, help="number of fake GPU nodes (default 0)")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per fake node (default 8)")
    parser.add_argument("--gpu-model", default="V100",
                        help="GPU model of the fake nodes (default V100); a comma-separated list, e.g. V100,T4, "
                        "gives the nodes the models in turn (with --nodes 4: 2 V100 nodes and 2 T4 nodes)")
    parser.add_argument("--gpu-memory", help="memory per GPU, for every model (default: each model's, e.g. T4 16Gi, "
                                              f"V100 32Gi, A100 and H100 80Gi; {DEFAULT_GPU_MEMORY} for other models)")
    parser.add_argument("--nvlink-groups", default="", metavar="SIZES",
                        help="the NVLink groups each fake node's GPUs form, as sizes in GPU order adding up to "
                             "--gpus-per-node, e.g. 4,4 (GPUs 0-3 and 4-7) or 2,2,4; a 1 is a GPU without "
                             "NVLink peers (default: no nvlinkGroup on any GPU)")
    parser.add_argument(
        "--with-kube-scheduler",
        action="store_true",
        help="also run the default kube-scheduler (for pods without schedulerName: tessera)",
    )
    parser.add_argument(
        "--with-controller-manager",
        action="store_true",
        help="also run kube-controller-manager with its default controllers (Deployments, Jobs, "
        "StatefulSets, DaemonSets, quota, GC, ...) except those that need a kubelet or a cloud",
    )
    parser.add_argument(
        "--kwok",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run kwok for the fake nodes, so their pods run, finish (the delay in the annotation "
        "pod-complete.stage.kwok.x-k8s.io/delay after they started; Job pods after 1s) and go away when "
        "deleted, as with a kubelet (default: on; --no-kwok leaves bound pods Pending for ever)",
    )
    parser.set_defaults(func=run)
    return parser


def _configure_logging() -> None:
    logger = logging.getLogger("scheduler.kube")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("dev-cluster: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


class DirectoryInUse(Exception):
    """Another dev-cluster holds the directory's lock."""

    def __init__(self, directory: Path, holder: str) -> None:
        super().__init__(f"{directory} is in use by another dev-cluster (pid {holder}); stop it first "
                         "or pick another --dir")


class DirectoryLock:
    """An exclusive lock on a dev-cluster directory (`dev-cluster.lock` in it, holding the pid).

    Why: a second dev-cluster on the same --dir rewrites the running one's certificates, etcd data
    and kubeconfig under it (its apiserver reloads the new CA, and every client of it gets 401).
    flock(2) goes with the process, so a killed dev-cluster never leaves the directory locked."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "dev-cluster.lock"
        self._fd = -1

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise `DirectoryInUse` (or the OSError of an unusable directory)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
                raise DirectoryInUse(self.path.parent, holder) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        os.close(self._fd)  # closing the descriptor releases the lock


def _models(args: argparse.Namespace) -> list[str]:
    """The models of `--gpu-model`, a comma-separated list."""
    return str(args.gpu_model).split(",")


def _nvlink_groups(args: argparse.Namespace) -> tuple[int, ...]:
    """The sizes of `--nvlink-groups` (checked by `_argument_error`); () when not given."""
    text = str(args.nvlink_groups or "").strip()
    return tuple(int(size) for size in text.split(",")) if text else ()


def _argument_error(args: argparse.Namespace) -> str | None:
    if args.nodes < 0 or args.gpus_per_node < 0:
        return "--nodes and --gpus-per-node must not be negative"
    if str(args.nvlink_groups or "").strip():
        sizes = str(args.nvlink_groups).split(",")
        if not all(size.strip().isdigit() and int(size) > 0 for size in sizes):
            return f"--nvlink-groups {args.nvlink_groups!r}: expected group sizes such as 4,4 (positive numbers)"
        if sum(_nvlink_groups(args)) != args.gpus_per_node:
            return (f"--nvlink-groups {args.nvlink_groups!r} adds up to {sum(_nvlink_groups(args))} GPUs, and "
                    f"--gpus-per-node is {args.gpus_per_node}: the groups partition each node's GPUs")
    if args.gpu_memory is not None:
        try:
            memory = parse_quantity(args.gpu_memory)
        except QuantityError as err:
            return f"--gpu-memory {args.gpu_memory!r} is not a quantity ({err}); e.g. 32Gi"
        if memory <= 0:
            return f"--gpu-memory {args.gpu_memory!r} must be positive; e.g. 32Gi"
    models = _models(args)
    seen: dict[str, str] = {}
    for model in models:
        if not model or not is_label_value(model):
            return (f"--gpu-model {args.gpu_model!r} names {model!r} (each model is a label value on its nodes): "
                    "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit; "
                    "e.g. A100-80GB, or V100,T4 for two")
        # one case-insensitive name per model: the nodes' names (`v100-node-000`) are lower case
        if model.lower() in seen:
            return f"--gpu-model {args.gpu_model!r} names {seen[model.lower()]} twice"
        seen[model.lower()] = model
    if 0 < args.nodes < len(models):
        return (f"--nodes {args.nodes} leaves {models[args.nodes]} without a node: give at least one node per "
                f"model of --gpu-model ({len(models)})")
    return None


def run(args: argparse.Namespace) -> int:
    """Run the dev cluster until SIGINT/SIGTERM/SIGHUP. Returns the process exit status."""
    _configure_logging()
    problem = _argument_error(args)
    if problem is not None:
        print(f"dev-cluster: {problem}", file=sys.stderr)
        return 2
    temporary = args.dir is None
    directory = Path(tempfile.mkdtemp(prefix="tessera-dev-")) if temporary else Path(args.dir)
    if directory.exists() and not directory.is_dir():
        print(f"dev-cluster: cannot use --dir {directory}: it is not a directory", file=sys.stderr)
        return 2
    lock = DirectoryLock(directory)
    try:
        lock.acquire()
    except DirectoryInUse as err:
        print(f"dev-cluster: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"dev-cluster: cannot use --dir {directory}: {err.strerror or err}", file=sys.stderr)
        return 2
    try:
        return _run_locked(args, directory, temporary)
    finally:
        lock.release()


def _say_where_kubectl_is(cached: Path | None) -> None:
    """Name the kubectl beside the control-plane binaries, or how to build one when the user has
    none: a new user's trial had the kubeconfig to export but no kubectl to use it with."""
    on_path = shutil.which("kubectl") is not None
    if cached is not None:
        hint = "" if on_path else f" (none on PATH: alias kubectl={cached})"
        log.info("kubectl beside the control-plane binaries: %s%s", cached, hint)
    elif not on_path:
        log.info("no kubectl on PATH: `WITH_KUBECTL=1 bash %s` builds kubectl %s into %s", build_script(),
                 K8S_VERSION, default_bin_dir())


class StopRequest:
    """Asked for by a signal handler, waited for by the main thread, without a lock.

    Not a `threading.Event`: a Python signal handler runs in the main thread between two of its
    bytecodes, possibly inside `Event.wait` while it holds the Event's non-reentrant lock, and
    `Event.set()` from the handler would then wait for that lock forever (a dev-cluster that got
    SIGINT just after its ready line once never stopped). Appending to a list takes no lock."""

    POLL_SECONDS = 0.1  # how late a signal delivered to another thread is seen at most

    def __init__(self) -> None:
        self.signals: list[int] = []

    def request(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def wait(self, timeout: float) -> bool:
        """True as soon as a stop was asked for, False after `timeout` seconds without one."""
        deadline = time.monotonic() + timeout
        while not self.signals:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, self.POLL_SECONDS))
        return True


def _run_locked(args: argparse.Namespace, directory: Path, temporary: bool) -> int:
    stop = StopRequest()
    # SIGHUP too: a closed terminal or SSH session must not leave the plane running
    previous = {sig: signal.signal(sig, stop.request) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    # SIGUSR1: restart kube-apiserver alone, so operations.md's apiserver restart can be rehearsed
    # (a component that exits by itself ends the plane); asked as a stop is, without a lock
    restart = StopRequest()
    previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, restart.request)
    plane = LocalControlPlane(
        directory,
        with_controller_manager=args.with_controller_manager,
        with_kube_scheduler=args.with_kube_scheduler,
        with_kwok=args.kwok,
    )
    status = 0
    try:
        log.info("starting control plane in %s", directory)
        plane.start()
        groups = models_in_turn(args.nodes, _models(args))
        if groups:
            log.info("creating %s", fake_nodes(groups, args.gpus_per_node))
        for nodes, model in groups:  # --gpu-memory, else the model's own
            plane.add_fake_gpu_nodes(nodes, args.gpus_per_node, model, args.gpu_memory or gpu_memory(model),
                                     nvlink_groups=_nvlink_groups(args))
        log.info("logs: %s", ", ".join(str(p) for p in plane.log_files().values()))
        print(f"ready: {plane.kubeconfig}", flush=True)
        log.info("export KUBECONFIG=%s ; press Ctrl-C to stop", plane.kubeconfig)
        _say_where_kubectl_is(plane.binaries.kubectl)
        while not stop.wait(1.0):
            if restart.signals:
                restart.signals.clear()
                log.info("restarting kube-apiserver (SIGUSR1); etcd keeps the data, the rest keeps running")
                plane.restart_apiserver()
                log.info("kube-apiserver restarted on the same address: %s", plane.server)
            dead = plane.dead_components()
            if dead:
                log.error("component(s) exited unexpectedly: %s; see logs in %s", ", ".join(dead), directory)
                status = 1
                break
    except (BinariesNotFound, ProcessStartError, TimeoutError, RuntimeError, OSError) as err:
        print(f"dev-cluster: {err}", file=sys.stderr)
        status = 1
    finally:
        log.info("stopping")
        began = time.monotonic()
        plane.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if temporary and status == 0:
            shutil.rmtree(directory, ignore_errors=True)
        elif temporary:
            log.info("kept %s for inspection", directory)
        log.info("stopped in %.1f s", time.monotonic() - began)
    return status
