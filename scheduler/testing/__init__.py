"""Fault-injection support: proxy, invariants, and the scenario harness shared by tests and soak.

Why this lives in the package and not under ``tests/``: the CI fault scenarios
(``tests/e2e/test_faults.py``) and the soak (``python -m bench.soak``) must run *the same*
scenario machinery, and bench code should not import test modules.

- :mod:`scheduler.testing.faultproxy` — the TLS-terminating fault proxy between Tessera and the
  apiserver.
- :mod:`scheduler.testing.invariants` — the checks over the apiserver's state, and the watcher
  that records what happened during a run.
- :mod:`scheduler.testing.faultrun` — :class:`FaultRun`, one scenario on a GPU cluster of fake
  nodes with Tessera replicas behind the proxy, and its report.
"""
