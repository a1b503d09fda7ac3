"""`kubectl tessera`: the kubectl plugin (the `kubectl-tessera` executable the package installs).

`nodes` shows every GPU as the scheduler's core sees it, `explain POD` why a pod waits or where it
went, `what-if --config FILE` where the pending pods would go under another configuration. Each
command lists the cluster once (`scheduler.kube.snapshot`), feeds the lists to a fresh core
exactly as the live scheduler's informers do, and renders the shared view model
(`scheduler.view`). Nothing is written to the cluster.
"""
