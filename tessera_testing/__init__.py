"""Tessera's test harness: fault injection and a fake kubelet. Dev-only, never installed.

Why a top-level package of its own, outside ``scheduler`` and outside ``tests/``:

- not in ``scheduler``: it is not product. ``[tool.setuptools.packages.find]`` takes only
  ``scheduler*`` and the Dockerfile copies only ``scheduler/``, so neither the wheel nor the image
  carries it (``tests/unit/test_dockerfile.py`` builds the wheel and checks);
- not under ``tests/``: the CI fault scenarios (``tests/e2e/test_faults.py``) and the soak
  (``python -m bench.soak``) must run *the same* scenario machinery, and bench code should not
  import test modules. From the repository root — where pytest and ``python -m bench.*`` run —
  it imports as plainly as ``bench`` does.

- :mod:`tessera_testing.faultproxy` — the TLS-terminating fault proxy between Tessera and the
  apiserver.
- :mod:`tessera_testing.invariants` — the checks over the apiserver's state, and the watcher
  that records what happened during a run.
- :mod:`tessera_testing.faultrun` — :class:`FaultRun`, one scenario on a GPU cluster of fake
  nodes with Tessera replicas behind the proxy, and its report.
- :mod:`tessera_testing.fakekubelet` — the kubelet's side of the device-plugin gRPC API, for the
  node agent's tests.
"""
