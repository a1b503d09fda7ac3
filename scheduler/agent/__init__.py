"""The node agent (`tessera agent`): the node-side half of device classes (docs/design.md §2).

One agent runs per GPU node. It closes the loop from a physical GPU to a container:

- `devices` / `nvml`: what GPUs the node has (NVML, or a file for tests and GPU-less machines);
- `publish`: one ExtendedResource per GPU, so the scheduler can see and choose devices;
- `slots`: which device-plugin endpoints to serve (one per ResourceClass matching local devices);
- `allocate`: which pod a kubelet `Allocate` call is for, decided from the scheduler's
  `tessera.dev/devices` annotation, because the kubelet does not say;
- `plugin`: the kubelet device-plugin API (v1beta1 gRPC over unix sockets);
- `agent`: the process that ties them together and keeps going through API and kubelet restarts.
- `cli`: `tessera agent`: start-up checks, one-line start-up errors, signals.

Like `scheduler/kube`, this package talks to the outside world; what it decides is kept in small
pure functions (`publish`, `slots`, `allocate`) so unit tests can cover it without a cluster.
"""
