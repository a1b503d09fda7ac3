"""The configuration the installed scheduler runs with: what `nodes` and `explain` use when no
`--config` is given.

deploy/ and the Helm chart mount the ConfigMap `tessera-scheduler-config` (key `config.yaml`) in
the scheduler's namespace as its configuration. A dry run with the built-in profile on a cluster
whose scheduler runs another one (other weights, another schedulerName, other plugins) explains
a decision the scheduler would not make, so that file is read when it is there. When it is not
(no ConfigMap: a scheduler started by hand or by `tessera dev-cluster`) the built-in one is used
quietly; when it cannot be read or is invalid, the built-in one is used and a warning says why.
The Lease the installed scheduler elects on is then not the built-in one's: it is read from the
document's own `leaderElection` when that section is valid, else it is not known (`lease`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from scheduler.api.config import (
    ConfigError,
    LeaderElectionConfig,
    SchedulerConfig,
    load_config,
    parse_config_text,
    parse_leader_election_text,
)
from scheduler.kube.http import TRANSPORT_ERRORS, KubeHttp
from scheduler.kube.snapshot import CONFIG_READER, ROLES_FILE
from scheduler.logs import describe_error

__all__ = ["CONFIG_KEY", "CONFIG_MAP", "DEFAULT_NAMESPACE", "ChosenConfig", "config_grant",
           "installed_config", "lease_grant"]

CONFIG_MAP = "tessera-scheduler-config"  # deploy/scheduler/configmap.yaml, the chart's scheduler-configmap.yaml
CONFIG_KEY = "config.yaml"
DEFAULT_NAMESPACE = "tessera-system"


@dataclass(frozen=True, slots=True)
class ChosenConfig:
    config: SchedulerConfig  # its `source`: the file, `NAMESPACE/tessera-scheduler-config`, or the built-in one
    warning: str | None = None  # why the installed configuration was not used, when it should have been
    # when `config` is the built-in one in place of an installed one: the installed document's own
    # leaderElection (its section valid), or why the installed scheduler's Lease is not known
    election: LeaderElectionConfig | str | None = None

    @property
    def lease(self) -> LeaderElectionConfig | str:
        """The leaderElection saying who schedules with this configuration, or why it is not known
        (never the built-in Lease in place of an installed configuration's)."""
        return self.config.leader_election if self.election is None else self.election


DRY_RUN_FALLBACK = "the dry run uses the built-in configuration (give --config FILE for another)"


async def installed_config(http: KubeHttp, namespace: str) -> ChosenConfig:
    """The configuration in `namespace`'s `tessera-scheduler-config` ConfigMap, else the built-in
    one; a warning says why it is not used, ending in what the built-in one is then used for."""
    where = f"{namespace}/{CONFIG_MAP}"
    try:
        response = await http.request("GET", f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{CONFIG_MAP}")
    except TRANSPORT_ERRORS as err:  # the listing went through: say so, go on
        why = f"configmap {where}: cannot be read ({describe_error(err)})"
        return ChosenConfig(load_config(None), f"{why}; {DRY_RUN_FALLBACK}", _unknown(why))
    if response.status == 404:
        return ChosenConfig(load_config(None))
    if response.status != 200:
        why = f"configmap {where}: {'denied' if response.status in (401, 403) else 'cannot be read'} " \
              f"(HTTP {response.status})" + (f": {config_grant('get on it', namespace)}" if response.status == 403 else "")
        return ChosenConfig(load_config(None), f"{why}; {DRY_RUN_FALLBACK}", _unknown(why))
    try:
        body = response.json()
    except ValueError:  # not the apiserver's JSON (a proxy's page)
        body = None
    data = body.get("data") if isinstance(body, dict) else None
    text = data.get(CONFIG_KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        why = f"configmap {where} has no {CONFIG_KEY}"
        return ChosenConfig(load_config(None), f"{why}; {DRY_RUN_FALLBACK}", _unknown(why))
    try:
        return ChosenConfig(parse_config_text(text, where))
    except ConfigError as err:
        why = f"invalid configuration: {err}"
        try:
            election: LeaderElectionConfig | str = parse_leader_election_text(text, where)
        except ConfigError:
            election = _unknown(why)
        return ChosenConfig(load_config(None), f"{why}; {DRY_RUN_FALLBACK}", election)


def config_grant(permission: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """What a 403 on the installed scheduler's ConfigMap or Lease asks for: `permission`, and the
    shipped Role that grants it (deploy/rbac/user-roles.yaml; the chart's, in its release namespace)."""
    return (f"needs {permission}: ask for the Role {CONFIG_READER} in {namespace} (bound with a RoleBinding there; "
            f"{ROLES_FILE})")


def lease_grant(lease: str, role_namespace: str = DEFAULT_NAMESPACE) -> str:
    """What a 403 on the Lease `lease` (namespace/name) asks for. The shipped Role, in
    `role_namespace` (the installed scheduler's: --scheduler-namespace), grants its own release's
    Lease only (the chart's leaderElection.resourceName, in its namespace). A Lease elsewhere (the
    built-in configuration's kube-system/tessera, as on dev-cluster) needs a Role of its own there:
    a trial's team users, holding the shipped Role, were told to ask for it."""
    namespace, _, name = lease.partition("/")
    if namespace == role_namespace:
        return (f"needs get on leases.coordination.k8s.io {lease}: ask for the Role {CONFIG_READER} in {namespace} "
                f"(bound with a RoleBinding there; {ROLES_FILE})")
    return (f"needs get on leases.coordination.k8s.io {lease}: the shipped Role {CONFIG_READER} grants only a Lease "
            f"in {role_namespace}; ask for a Role in {namespace} granting it, bound with a RoleBinding in {namespace} "
            f"(kubectl -n {namespace} create role tessera-lease-reader --verb=get "
            f"--resource=leases.coordination.k8s.io --resource-name={name})")


def _unknown(why: str) -> str:
    return f"which Lease the installed scheduler elects on is not known ({why})"
