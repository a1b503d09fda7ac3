"""TopologyPlacementArgs: the cluster's network topology as ordered node-label levels.

- `levels`: widest first, e.g. block → rack → hostname, each `{nodeLabel: <key>, name: <word>}`,
  as Kueue's and KAI-Scheduler's `Topology.spec.levels[].nodeLabel`. A gang's topology key names
  one of these labels; a domain of a level is identified by its own label value *and* its
  ancestors' (rack "r1" of block "a" is not rack "r1" of block "b"), and "preferred" climbs to the
  next wider level. A key that is not a configured level is a level of its own (upstream's
  TopologyPlacementGenerator: the label value alone names the domain). `name` is the word
  messages use ("no rack has room ..."); by default the key's last segment without a
  `topology-` prefix.
- `maxDomainTrials`: at most this many candidate domains per level are tried with the whole gang
  transaction (tightest first) before the level is given up (default 16), which bounds a gang's
  cost on large clusters.
"""

from __future__ import annotations


from pydantic import BaseModel, ConfigDict, Field

from scheduler.api.names import label_key_problem
from scheduler.api.config_reader import ArgsReader, Checks, duplicate, invalid, required

FIELDS = ("levels", "maxDomainTrials")


class TopologyLevel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    node_label: str
    name: str


class TopologyPlacementArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    levels: tuple[TopologyLevel, ...] = ()
    max_domain_trials: int = Field(default=16, ge=1)


def level_name(node_label: str) -> str:
    """The word for a level in messages: `topology.kubernetes.io/rack` → `rack`."""
    word = node_label.rsplit("/", 1)[-1]
    return word.removeprefix("topology-") or word


HOSTNAME = "kubernetes.io/hostname"


def parse_args(args: ArgsReader) -> TopologyPlacementArgs:
    levels: list[TopologyLevel] = []
    seen: set[str] = set()
    path = args.at("levels")
    found = Checks()

    def read_level(i: int, raw: object) -> TopologyLevel:
        item = ArgsReader(raw, f"{path}[{i}]")
        item.check_keys(("nodeLabel", "name"))
        label = item.get_str("nodeLabel", "").strip()
        if not label:
            required(item.at("nodeLabel"), "a node label key such as topology.kubernetes.io/rack")
        if (problem := label_key_problem(label)) is not None:
            invalid(item.at("nodeLabel"), label, problem)
        if label in seen:
            duplicate(item.at("nodeLabel"), label, "each level is one node label")
        if levels and levels[-1].node_label == HOSTNAME:  # as Kueue's Topology validation
            invalid(path + f"[{i - 1}].nodeLabel", HOSTNAME,
                    "the kubernetes.io/hostname label can only be used at the lowest level of topology")
        seen.add(label)
        return TopologyLevel(node_label=label, name=item.get_str("name", "") or level_name(label))

    def read_trials() -> int:
        trials = args.get_int("maxDomainTrials", 16)
        if trials < 1:
            invalid(args.at("maxDomainTrials"), trials, "must be greater than 0")
        return trials

    no_levels: list[object] = []
    for i, raw in enumerate(found.read(lambda: args.get_list("levels"), no_levels)):
        level = found.read(lambda: read_level(i, raw), None)
        if level is not None:
            levels.append(level)
    trials = found.read(read_trials, 16)
    found.raise_errors()
    return TopologyPlacementArgs(levels=tuple(levels), max_domain_trials=trials)
