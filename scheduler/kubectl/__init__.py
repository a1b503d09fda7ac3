"""`kubectl tessera`: the kubectl plugin (the `kubectl-tessera` executable the package installs).

`nodes` shows every GPU as the scheduler's core sees it, `explain POD` why a pod waits or where it
went, `what-if --config FILE` where the pending pods would go under another configuration,
`rollback-check` whether an older build would give a GPU in use away (`rollback.py`). Each
command lists the cluster once (`scheduler.kube.snapshot`); the first three feed the lists to a
fresh core exactly as the live scheduler's informers do and render the shared view model
(`scheduler.view`). Nothing is written to the cluster.
"""

from scheduler.paused_import import import_with_collector_paused


def main() -> int:
    """The `kubectl-tessera` executable: the plugin's module imported the way `tessera` imports
    its commands (with the collector paused), then run."""
    return int(import_with_collector_paused("scheduler.kubectl.cli").main())
