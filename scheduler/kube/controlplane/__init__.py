"""A local Kubernetes control plane (etcd + kube-apiserver, optionally kube-controller-manager
and the default kube-scheduler) run from real binaries.

Why it exists: Tessera's end-to-end tests, benchmarks and ``tessera dev-cluster`` need the real
apiserver's semantics (Binding, admission, CRD validation, watches) on machines without Docker or
kind. The binaries are built from the Go module proxy by ``hack/build-control-plane.sh`` or taken
from ``KUBEBUILDER_ASSETS`` (see :mod:`.binaries`).

Modules: ``binaries`` (finding/building), ``certs`` (CA and certificates), ``processes`` (child
process handling), ``components`` (command-line flags), ``kubeconfig``, ``rest`` (a small sync
client), ``crds`` (installing deploy/crds), ``fakenodes`` (GPU nodes without kubelets),
``cluster`` (``LocalControlPlane``, which ties them together) and ``cli`` (``tessera dev-cluster``).
"""

from .binaries import BinariesNotFound, ControlPlaneBinaries, find_binaries
from .cluster import LocalControlPlane
from .processes import ProcessStartError
from .rest import ApiError, RestClient

__all__ = [
    "ApiError",
    "BinariesNotFound",
    "ControlPlaneBinaries",
    "LocalControlPlane",
    "ProcessStartError",
    "RestClient",
    "find_binaries",
]
