"""Messages a new user's trial found unhelpful (each test failed before its fix).

- A pod asking for a class resource name with a typo (`class.tessera.dev/v100-23g` where the class
  provides `class.tessera.dev/v100-32g`) read only `no ResourceClass provides "..."`; with no
  close name, it did not say which names the classes provide.
- A class whose selector names an attribute no device has (`modle` for `model`) read only
  `ResourceClass X matches no device in the cluster`, and its status said `Valid=True, 0 devices`.
"""

from __future__ import annotations

from scheduler.sim import builders as b
from tests.helpers import BINPACK, Run, config


def test_a_class_resource_name_with_a_typo_suggests_the_close_one() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("v100-32g", match_labels={"model": "V100"}))
    run.add(b.pod("p", limits={"class.tessera.dev/v100-23g": 1}))
    assert run.last("p").message.startswith(
        '0/1 nodes are available: no ResourceClass provides "class.tessera.dev/v100-23g" '
        '(did you mean "class.tessera.dev/v100-32g"?).')


def test_the_names_the_classes_provide_when_nothing_is_close() -> None:
    """A trial: a name no class provides, nothing close, read only `no ResourceClass provides
    "..."`: which names may a pod ask for? The valid classes' names are listed (at most 8), or
    that no valid class exists."""
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("v100-32g", match_labels={"model": "V100"}),
            b.resource_class("a100", match_labels={"model": "A100"}))
    run.add(b.pod("p", limits={"class.tessera.dev/none": 1}))
    assert run.last("p").message.startswith(
        '0/1 nodes are available: no ResourceClass provides "class.tessera.dev/none" (the ResourceClasses '
        'provide class.tessera.dev/a100, class.tessera.dev/v100-32g).')
    bare = Run(config(BINPACK))
    bare.add(b.node("n", gpus=1), b.pod("p", limits={"class.tessera.dev/none": 1}))
    assert bare.last("p").message.startswith(
        '0/1 nodes are available: no ResourceClass provides "class.tessera.dev/none" (no valid ResourceClass '
        'exists).')


def test_a_selector_key_no_device_has_is_named() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("typo", match_labels={"modle": "V100"}))
    run.add(b.pod("p", limits={"class.tessera.dev/typo": 1}))
    assert run.last("p").message.startswith(
        '0/1 nodes are available: ResourceClass typo matches no device in the cluster '
        '(no device has the attribute "modle").')


def test_the_class_status_says_which_attribute_no_device_has() -> None:
    run = Run(config(BINPACK))
    run.add(b.node("n", gpus=1), b.device("n", 0))
    run.add(b.resource_class("typo", match_labels={"modle": "V100"}))
    assert run.state.class_status("typo") == (
        True, 'selector and resourceName are valid (no device has the attribute "modle")', 0, "UnknownDeviceAttribute")
