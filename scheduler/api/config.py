"""Tessera's configuration: a `KubeSchedulerConfiguration` file in, a frozen `SchedulerConfig` out.

Why the upstream file format: operators already know it, the kubernetes.io bin-packing examples
work unchanged, and a config can be tried against kube-scheduler itself for comparison. Tessera
reads the subset it implements (see `config_parse` for the rules and every deliberate
difference) and refuses everything else with one line naming the field, because a scheduler that
starts with a half-understood config places pods in ways nobody asked for.

This module is the public face: the models (`config_model`), `parse_config` (`config_parse`) and
`load_config`, which adds the file handling — missing file, YAML syntax, duplicate keys — and the
built-in default (`scheduler/data/default-config.yaml`) used when no `--config` is given.
"""

from __future__ import annotations

import os
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from scheduler.api.config_model import (
    DEFAULT_SCHEDULER_NAME,
    ClientConnectionConfig,
    ConfigError,
    LeaderElectionConfig,
    PluginArgs,
    Profile,
    SchedulerConfig,
    ScoreWeights,
)
from scheduler.api.config_parse import SUPPORTED_API_VERSIONS, parse_config, parse_leader_election

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "SUPPORTED_API_VERSIONS",
    "BUILTIN_SOURCE",
    "ClientConnectionConfig",
    "ConfigError",
    "LeaderElectionConfig",
    "PluginArgs",
    "Profile",
    "SchedulerConfig",
    "ScoreWeights",
    "load_config",
    "load_config_or_report",
    "parse_config",
    "parse_config_text",
    "parse_leader_election_text",
]

BUILTIN_SOURCE = "<built-in default-config.yaml>"


def load_config(path: str | os.PathLike[str] | None) -> SchedulerConfig:
    """Read, validate and default the configuration file at `path` (None: the built-in default).

    Raises ConfigError (one line, naming the file and the field) for every user error.
    """
    if path is None:
        source = BUILTIN_SOURCE
        text = resources.files("scheduler").joinpath("data/default-config.yaml").read_text(encoding="utf-8")
    else:
        source = os.fspath(path)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(source, "", "no such file") from None
        except IsADirectoryError:
            raise ConfigError(source, "", "is a directory, not a configuration file") from None
        except UnicodeDecodeError:
            raise ConfigError(source, "", "is not UTF-8 text") from None
        except OSError as err:
            raise ConfigError(source, "", f"cannot be read: {err.strerror or err}") from None
    return parse_config_text(text, source)


def parse_config_text(text: str, source: str) -> SchedulerConfig:
    """A configuration file's text (read from `source`, named in errors), validated and defaulted."""
    return parse_config(_load_yaml(text, source), source)


def parse_leader_election_text(text: str, source: str) -> LeaderElectionConfig:
    """The `leaderElection` section alone of a configuration file's text, validated and defaulted
    (the rest of the file may be invalid)."""
    return parse_leader_election(_load_yaml(text, source), source)


def load_config_or_report(path: str | None) -> SchedulerConfig | None:
    """For the `tessera` commands: the configuration, or None once one line on stderr says why it
    is invalid (the command then exits 2, as for bad arguments)."""
    try:
        return load_config(path)
    except ConfigError as err:
        print(f"tessera: invalid configuration: {err}", file=sys.stderr)
        return None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which upstream's strict decoding also refuses and
    PyYAML would otherwise resolve silently to the last value."""


def _construct_mapping(loader: _StrictLoader, node: MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`, flattened by construct_mapping
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:  # unhashable key: let the normal constructor report it
            continue
        if duplicate:
            raise ConstructorError("while constructing a mapping", node.start_mark,
                                   f"found duplicate key {key!r}", key_node.start_mark)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# go-yaml (kube-scheduler's decoder) reads `1e3` as a float; YAML 1.1's resolver wants a dot
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float",
                                    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)$"),
                                    list("-+0123456789."))


def _load_yaml(text: str, source: str) -> object:
    """The file's one document. Empty documents (a stray `---`, only comments) are skipped; a
    second non-empty one is refused rather than ignored, since either could be the one meant."""
    try:
        documents: list[tuple[int, object]] = []
        loader = _StrictLoader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:  # not after check_node(); for the type checker
                    break
                data = loader.construct_document(node)
                if data is not None:
                    documents.append((node.start_mark.line + 1, data))
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = "; ".join(part for part in (err.context, err.problem) if part)
        raise ConfigError(source, "", f"invalid YAML{where}: {what}") from None
    except yaml.YAMLError as err:
        raise ConfigError(source, "", f"invalid YAML: {err}") from None
    except (ValueError, RecursionError) as err:  # an integer beyond int()'s digit limit, absurd nesting
        raise ConfigError(source, "", f"invalid YAML: {str(err) or type(err).__name__}") from None
    if len(documents) > 1:
        raise ConfigError(source, "", f"holds {len(documents)} YAML documents (the second at line {documents[1][0]}); "
                                      "a configuration file is one KubeSchedulerConfiguration")
    return documents[0][1] if documents else None
