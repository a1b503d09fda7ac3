"""LimitRanger's defaulting of a file's pods (`scheduler/kubectl/limitrange.py`), as the apiserver's
plugin/pkg/admission/limitranger mergeContainerResources does it: a container without a limit of R
gets the LimitRange's default[R], without a request its defaultRequest[R]; stated ones are kept."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.limitrange import container_defaults, default_pods


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
