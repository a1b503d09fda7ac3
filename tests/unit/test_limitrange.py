"""LimitRanger's defaulting of a file's pods (`scheduler/kubectl/limitrange.py`), as the apiserver's
plugin/pkg/admission/limitranger mergeContainerResources does it: a container without a limit of R
gets the LimitRange's default[R], without a request its defaultRequest[R]; stated ones are kept."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.limitrange import admit, container_defaults, default_pods


def _range(name: str, *items: dict[str, Any], namespace: str = "team-e") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"limits": list(items)}}


def _pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), namespace: str = "team-e",
         **spec: Any) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
            "spec": {"containers": list(containers), **({"initContainers": list(init)} if init else {}), **spec}}


def _resources(pod: dict[str, Any], field: str = "containers") -> list[dict[str, Any]]:
    return [container.get("resources") for container in pod["spec"][field]]


def test_a_bare_container_gets_the_default_limit_and_default_request() -> None:
    limit_range = _range("lr", {"type": "Container", "default": {"nvidia.com/gpu": "1", "cpu": "2"},
                                "defaultRequest": {"cpu": "500m"}})
    [pod] = default_pods([_pod({"name": "main"})], [limit_range])
    # defaultRequest where given, else the default limit (SetDefaults_LimitRangeItem)
    assert _resources(pod) == [{"limits": {"nvidia.com/gpu": "1", "cpu": "2"},
                                "requests": {"nvidia.com/gpu": "1", "cpu": "500m"}}]


def test_what_a_container_states_is_kept_and_an_unstated_request_is_its_limit() -> None:
    limit_range = _range("lr", {"type": "Container", "default": {"cpu": "2", "memory": "1Gi"},
                                "defaultRequest": {"cpu": "1", "memory": "512Mi"}})
    container = {"name": "main", "resources": {"limits": {"cpu": "4"}, "requests": {"memory": "100Mi"}}}
    [pod] = default_pods([_pod(container)], [limit_range])
    # cpu: limit 4 stated, its request the limit (SetDefaults_Pod), not the defaultRequest;
    # memory: request stated, limit the default
    assert _resources(pod) == [{"limits": {"cpu": "4", "memory": "1Gi"},
                                "requests": {"cpu": "4", "memory": "100Mi"}}]
    assert container["resources"] == {"limits": {"cpu": "4"}, "requests": {"memory": "100Mi"}}  # a copy


def test_max_and_min_default_as_the_apiserver_stores_a_limit_range() -> None:
    """A Container item's max is its default where it names none, its min its defaultRequest where
    neither defaultRequest nor default names one."""
    item = {"type": "Container", "max": {"cpu": "4", "memory": "2Gi"}, "default": {"memory": "1Gi"},
            "min": {"cpu": "100m", "ephemeral-storage": "1Gi"}}
    assert container_defaults(_range("lr", item)) == (
        {"cpu": "4", "memory": "1Gi"}, {"cpu": "4", "memory": "1Gi", "ephemeral-storage": "1Gi"})
    # Pod and PersistentVolumeClaim items default nothing
    assert container_defaults(_range("lr", {"type": "Pod", "max": {"cpu": "4"}})) == ({}, {})


def test_init_containers_are_defaulted_pod_level_resources_are_not() -> None:
    limit_range = _range("lr", {"type": "Container", "default": {"nvidia.com/gpu": "1"}})
    [pod] = default_pods([_pod({"name": "main"}, init=({"name": "setup"},), resources={"limits": {"cpu": "1"}})],
                         [limit_range])
    assert _resources(pod, "initContainers") == [{"limits": {"nvidia.com/gpu": "1"},
                                                  "requests": {"nvidia.com/gpu": "1"}}]
    assert pod["spec"]["resources"] == {"limits": {"cpu": "1"}}


def test_several_limit_ranges_apply_by_name_and_only_in_their_namespace() -> None:
    ranges = [_range("b", {"type": "Container", "default": {"cpu": "2", "memory": "1Gi"}}),
              _range("a", {"type": "Container", "default": {"cpu": "1"}}),
              _range("c", {"type": "Container", "default": {"nvidia.com/gpu": "1"}}, namespace="other")]
    elsewhere = _pod({"name": "main"}, namespace="team-f")
    [pod, untouched] = default_pods([_pod({"name": "main"}), elsewhere], ranges)
    assert _resources(pod) == [{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}]
    assert untouched is elsewhere


# LimitRanger's validation (PodValidateLimitFunc), after every LimitRange's defaulting: a pod that
# breaks a min, max or maxLimitRequestRatio is refused in the apiserver's words (what follows
# `pods "NAME" is forbidden: `), the plugin's errors aggregated as utilerrors.NewAggregate says them.

def _refused(pods: list[dict[str, Any]], *ranges: dict[str, Any]) -> list[tuple[str, str, str]]:
    _, refusals = admit(pods, ranges)
    return [(refusal.pod, refusal.plugin, refusal.message) for refusal in refusals]


def _limited(name: str = "main", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
             **extra: Any) -> dict[str, Any]:
    return {"name": name, "resources": {**({"requests": requests} if requests else {}),
                                        **({"limits": limits} if limits else {})}, **extra}


def test_a_request_below_a_containers_min_is_refused() -> None:
    limit_range = _range("lr", {"type": "Container", "min": {"cpu": "500m"}})
    pod = _pod(_limited(requests={"cpu": "100m"}, limits={"cpu": "1"}))
    assert _refused([pod], limit_range) == [
        ("team-e/p", "LimitRanger", "minimum cpu usage per Container is 500m, but request is 100m")]
    # at the min, and a bare container (given the min as its request by SetDefaults_LimitRangeItem): admitted
    assert _refused([_pod(_limited(requests={"cpu": "0.5"})), _pod({"name": "bare"})], limit_range) == []


def test_a_pods_summed_request_below_a_pod_min_or_none_at_all_is_refused() -> None:
    limit_range = _range("lr", {"type": "Pod", "min": {"cpu": "1", "memory": "64Mi"}})
    pod = _pod(_limited("a", requests={"cpu": "300m"}), _limited("b", requests={"cpu": "500m"}))
    # the items' resources in name order (upstream's is Go's map order), each error its own
    assert _refused([pod], limit_range) == [("team-e/p", "LimitRanger", (
        "[minimum cpu usage per Pod is 1, but request is 800m, "
        "minimum memory usage per Pod is 64Mi.  No request is specified]"))]


def test_a_limit_above_a_containers_max_is_refused() -> None:
    limit_range = _range("lr", {"type": "Container", "max": {"nvidia.com/gpu": "2", "memory": "1Gi"}})
    pod = _pod(_limited(limits={"nvidia.com/gpu": "4", "memory": "512Mi"}))
    assert _refused([pod], limit_range) == [
        ("team-e/p", "LimitRanger", "maximum nvidia.com/gpu usage per Container is 2, but limit is 4")]
    # a container that states no limit gets the max as its default (SetDefaults_LimitRangeItem): admitted
    assert _refused([_pod({"name": "bare"})], limit_range) == []


def test_a_pods_limit_above_a_pod_max_counts_init_containers_as_upstream_does() -> None:
    """podLimits: app containers and sidecars summed, raised to the largest init step."""
    limit_range = _range("lr", {"type": "Pod", "max": {"cpu": "2", "memory": "1536Mi"}})
    apps = (_limited("a", limits={"cpu": "1", "memory": "1Gi"}), _limited("b", limits={"cpu": "500m", "memory": "1Gi"}))
    assert _refused([_pod(*apps)], limit_range) == [
        ("team-e/p", "LimitRanger", "maximum memory usage per Pod is 1536Mi, but limit is 2Gi")]
    one = _limited("a", limits={"cpu": "1", "memory": "1Gi"})
    init = (_limited("setup", limits={"cpu": "3", "memory": "1Gi"}),)
    assert _refused([_pod(one, init=init)], limit_range) == [
        ("team-e/p", "LimitRanger", "maximum cpu usage per Pod is 2, but limit is 3")]
    sidecar = (_limited("proxy", limits={"cpu": "1500m", "memory": "100Mi"}, restartPolicy="Always"),)
    assert _refused([_pod(one, init=sidecar)], limit_range) == [
        ("team-e/p", "LimitRanger", "maximum cpu usage per Pod is 2, but limit is 2500m")]
    # pod-level resources stand for the containers' (PodLevelResources)
    halves = [_limited(name, requests={"memory": "512Mi"}, limits={"cpu": "1", "memory": "1Gi"}) for name in "ab"]
    assert _refused([_pod(*halves)], limit_range) == [
        ("team-e/p", "LimitRanger", "maximum memory usage per Pod is 1536Mi, but limit is 2Gi")]
    assert _refused([_pod(*halves, resources={"limits": {"memory": "1536Mi"}})], limit_range) == []


def test_a_limit_to_request_ratio_above_the_max_is_refused() -> None:
    limit_range = _range("lr", {"type": "Container", "maxLimitRequestRatio": {"cpu": "3"}})
    pod = _pod(_limited(requests={"cpu": "300m"}, limits={"cpu": "1"}))
    assert _refused([pod], limit_range) == [
        ("team-e/p", "LimitRanger", "cpu max limit to request ratio per Container is 3, but provided ratio is 3.333333")]
    assert _refused([_pod(_limited(requests={"cpu": "400m"}, limits={"cpu": "1200m"}))], limit_range) == []
    # no limit to judge (the ratio defaults neither): refused too
    assert _refused([_pod(_limited(requests={"cpu": "1"}))], limit_range) == [("team-e/p", "LimitRanger", (
        "cpu max limit to request ratio per Container is 3, but no limit is specified or limit is 0"))]


def test_errors_aggregate_in_order_alike_ones_said_once_and_init_containers_are_judged() -> None:
    limit_range = _range("lr", {"type": "Container", "min": {"cpu": "500m"}, "maxLimitRequestRatio": {"cpu": "2"}})
    low = _limited(requests={"cpu": "100m"}, limits={"cpu": "1"})
    assert _refused([_pod(low, {**low, "name": "second"})], limit_range) == [("team-e/p", "LimitRanger", (
        "[minimum cpu usage per Container is 500m, but request is 100m, "
        "cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000]"))]
    assert _refused([_pod(_limited(limits={"cpu": "1"}), init=(_limited("setup", limits={"cpu": "200m"}),))],
                    limit_range) == [("team-e/p", "LimitRanger",
                                      "minimum cpu usage per Container is 500m, but request is 200m")]


def test_the_first_limit_range_by_name_that_refuses_is_said_after_every_ones_defaults() -> None:
    """Each LimitRange defaults the pod first (admission's mutating pass), then each validates it."""
    ranges = [_range("b-max", {"type": "Container", "max": {"cpu": "1"}}),
              _range("a-default", {"type": "Container", "default": {"cpu": "2"}}),
              _range("c-min", {"type": "Container", "min": {"cpu": "4"}})]
    pods = [_pod({"name": "main"}), _pod({"name": "main"}, namespace="team-f")]
    defaulted, refusals = admit(pods, ranges)
    assert defaulted[0]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2"}
    assert [(r.pod, r.message) for r in refusals] == [
        ("team-e/p", "maximum cpu usage per Container is 1, but limit is 2")]


def test_max_and_min_judge_both_request_and_limit() -> None:
    """maxConstraint also refuses a request above the max, minConstraint a limit below the min
    (a pod whose request exceeds its limit, which the LimitRanger judges before validation)."""
    ceiling = _range("lr", {"type": "Container", "max": {"cpu": "1"}})
    assert _refused([_pod(_limited(requests={"cpu": "2"}, limits={"cpu": "1"}))], ceiling) == [
        ("team-e/p", "LimitRanger", "maximum cpu usage per Container is 1, but request is 2")]
    floor = _range("lr", {"type": "Container", "min": {"cpu": "1"}})
    assert _refused([_pod(_limited(requests={"cpu": "1"}, limits={"cpu": "500m"}))], floor) == [
        ("team-e/p", "LimitRanger", "minimum cpu usage per Container is 1, but limit is 500m")]


def test_a_ratio_over_a_zero_request_is_its_own_refusal() -> None:
    limit_range = _range("lr", {"type": "Container", "maxLimitRequestRatio": {"cpu": "2"}})
    assert _refused([_pod(_limited(requests={"cpu": "0"}, limits={"cpu": "1"}))], limit_range) == [
        ("team-e/p", "LimitRanger", "cpu max limit to request ratio per Container is 2, but no request is specified "
                                    "or request is 0")]
