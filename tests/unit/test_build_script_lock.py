"""`hack/build-control-plane.sh` builds one at a time per cache directory, however it is started.

Seen on a fresh machine: a user's `WITH_KUBECTL=1 bash hack/build-control-plane.sh` and an e2e
session's set-up (`find_binaries`) ran it at once; each rewrote the wrapper module's go.mod and
tools.go in the shared cache, and the user's kubectl build failed with "missing go.sum entry".
Only the Python caller took a lock. The script now takes it itself (`flock` on the cache's
`.build.lock`), so a second run waits for the first, whoever started either.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from scheduler.kube.controlplane.binaries import K8S_VERSION, build_script, find_binaries


def test_a_second_build_waits_for_the_one_holding_the_cache_lock(tmp_path: Path) -> None:
    binaries = find_binaries()  # built (or found) once: the run below then has nothing to build
    cache = tmp_path / "cache"
    lock_path = cache / f"k8s-{K8S_VERSION}" / ".build.lock"
    lock_path.parent.mkdir(parents=True)
    env = {**os.environ, "TESSERA_CACHE": str(cache), "TESSERA_K8S_BIN": str(binaries.kube_apiserver.parent),
           "K8S_VERSION": K8S_VERSION}
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build holds the cache
        waiting = subprocess.Popen(["bash", str(build_script())], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.wait(timeout=5)  # without the lock it checks the binaries and is done in about a second
    out, err = waiting.communicate(timeout=120)  # the lock released: it goes on, finds everything built
    assert waiting.returncode == 0, err.decode()
    assert out.decode().strip().splitlines()[-1] == str(binaries.kube_apiserver.parent)
