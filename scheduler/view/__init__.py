"""What people look at: the cluster as the core sees it, turned into a view model.

`kubectl tessera` (scheduler/kubectl/), the GPU map page `tessera run --gpu-map` serves, and
`tessera simulate --output html` all render the same `ClusterView` (model.py), built from a core
`Scheduler` by `cluster.py`. Nothing here talks to the apiserver or reads a clock: the callers
pass in what they know (a live loop's held Bindings and recent decisions, a listed cluster's pod
conditions, a replay's final attempts), so all three show one picture of the same state.
"""
