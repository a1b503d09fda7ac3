"""Where a gang may go as a whole: topology domains and the plan of which to try, in what order.

Upstream's pod-group cycle (Kubernetes 1.36, `schedule_one_podgroup.go`) asks PlacementGenerate
plugins for candidate node sets ("placements"), runs the whole group's scheduling inside each and
keeps the best. Tessera's cycle does the same with its gang transaction; these are the shapes the
placement plugin hands it. A domain restricts every member's attempt through `PodContext.domain`,
which the placement plugin's own filter enforces, so the nominated-node path and `--explain` see
the same restriction as the search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Domain:
    """One topology domain: the nodes under one label value (and its ancestors' values)."""

    level: str  # the level's word in messages ("rack")
    path: tuple[str, ...]  # label values from the widest configured level down to this one
    nodes: frozenset[str]
    mask: npt.NDArray[np.bool_]  # the same nodes as node-table rows (the table's order at plan time)

    @property
    def name(self) -> str:
        return "/".join(self.path)


@dataclass(frozen=True, slots=True)
class PlacementTier:
    """Candidate domains of one level, tightest first; `domains` None: anywhere in the cluster.

    `holds`: the most pending members any domain of the level could take by free capacity alone
    (for the message when none takes enough). `pinned`: the name of the one domain the gang's bound
    members are in (the rest may go nowhere else), "" when none pins the level."""

    level: str
    domains: tuple[Domain, ...] | None
    holds: int = 0
    pinned: str = ""


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """The tiers to try in order (a required constraint has one; a preferred one climbs to wider
    levels and ends with the whole cluster). `refusal`: why no domain can be tried at all (bound
    members already span two domains, ...), "" otherwise. `unusable`: the node-table rows no member
    can use (a cordon, a taint, a selector, no room), whose own reasons the gang's message names
    beside `no_room`'s (no domain counts them)."""

    tiers: tuple[PlacementTier, ...]
    required: bool
    refusal: str = ""
    unusable: npt.NDArray[np.bool_] | None = None

    def no_room(self, gang: str, needed: int, largest: int) -> str:
        """Why the required constraint could not be met: upstream-style, one line."""
        if self.refusal:
            return self.refusal
        tier = self.tiers[-1] if self.tiers else None  # the required (widest) level
        level = tier.level if tier is not None else "domain"
        plural = "s" if needed != 1 else ""
        if tier is not None and tier.pinned:  # the one domain the rest may join: named, with its room
            return (f"no room for {needed} more pod{plural} of gang {gang}: its bound members are in {level} "
                    f"{tier.pinned}, which has room for {largest} more")
        return f"no {level} has room for {needed} pod{plural} of gang {gang} (largest: {largest})"
