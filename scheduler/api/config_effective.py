"""The configuration a replica runs with, as an operator reads it: `/configz` and a short digest.

Why: a ConfigMap changed by `helm upgrade` is not what a running replica uses until it restarts
(nothing reloads), and two replicas of a rolling upgrade may run different ones. kube-scheduler
serves its configuration at `/configz` (cmd/kube-scheduler/app/server.go registers it with
component-base `configz.New("componentconfig")`); Tessera serves the resolved `SchedulerConfig`
the same way, and logs and exports a digest of it so replicas can be compared at a glance.

The resolved model, not the file: defaults applied, plugins merged, one score weight per plugin,
and each profile's `pluginArgs` holding the args of every plugin it runs that has args, defaults
included — as kube-scheduler's defaulting (pkg/scheduler/apis/config/v1 defaults.go,
`setDefaults_KubeSchedulerProfile`) appends a pluginConfig entry for every enabled plugin with
args (and keeps the file's entries, so args given to a plugin the profile does not run show too).
The model itself keeps only the args that differ from the defaults (`PluginArgs`: equal
configurations compare equal); the defaults are filled in here, in what `/configz` and the digest
show, so both stay one function of the configuration. Keys are camelCase, as Kubernetes
configuration reads. The digest covers the configuration alone, not the file it came from, so the
same settings read from two paths give the same digest.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from scheduler.api.config_model import Profile, SchedulerConfig
from scheduler.core.plugins.registry import enabled_in

CONFIGZ_NAME = "componentconfig"  # the name kube-scheduler registers its configz under
DIGEST_HEX = 12


def effective_config(config: SchedulerConfig) -> dict[str, Any]:
    """The resolved configuration as JSON-ready camelCase data (without the file it came from, or
    the list of its fields Tessera does not use)."""
    dumped = config.model_dump(mode="json", exclude={"source", "unused_fields"})
    for profile, shown in zip(config.profiles, dumped["profiles"], strict=True):
        shown["plugin_args"] = _every_enabled_plugins_args(profile)
        shown["plugins"] = [spec.name for spec in enabled_in(profile)]  # what the profile runs, in order
    camel: dict[str, Any] = _camel(dumped)
    return camel


def _every_enabled_plugins_args(profile: Profile) -> dict[str, Any]:
    """Plugin name -> its args as JSON data, in name order as `PluginArgs` keeps them: every
    plugin the profile runs that has args (the configured ones, or the plugin's defaults), and
    any other the file gave args that differ from the defaults (upstream keeps a pluginConfig
    entry whether or not its plugin is enabled)."""
    args = {spec.name: spec.default_args() for spec in enabled_in(profile) if spec.args is not None}
    args.update(profile.plugin_args)
    return {name: args[name].model_dump(mode="json") for name in sorted(args)}


def config_digest(config: SchedulerConfig) -> str:
    """The first 12 hex digits of the SHA-256 of the effective configuration's canonical JSON
    (sorted keys, no whitespace)."""
    canonical = orjson.dumps(effective_config(config), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:DIGEST_HEX]


def configz(config: SchedulerConfig) -> dict[str, Any]:
    """`/configz`'s body: kube-scheduler's shape (an object keyed by the configz name) holding the
    file it was read from, the digest and the configuration."""
    return {CONFIGZ_NAME: {"source": config.source, "digest": config_digest(config),
                           "configuration": effective_config(config)}}


def _camel(value: Any) -> Any:
    """snake_case keys to camelCase, all the way down. Safe because every key in the dump is a
    model's field name or a plugin name (score weights, plugin args; none has an underscore): user
    data — scheduler names, resource names, topology labels — are values, never keys, and stay as
    written (tests/unit/test_build_and_config_info.py). A field holding a map keyed by user data
    would need this to convert only the models' field names."""
    if isinstance(value, dict):
        return {_camel_key(key): _camel(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_camel(item) for item in value]
    return value


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)
