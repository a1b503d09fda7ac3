"""TesseraUnhonouredTerms: a pod with a required placement term Tessera cannot honour is refused.

Tessera honours required pod affinity and anti-affinity (InterPodAffinity's filter), except a term
with a non-empty namespaceSelector (it watches no Namespaces), and DoNotSchedule topology spread
(PodTopologySpread's filter). Placing a pod that requires what is not honoured anyway breaks
what it asked for in silence: a Deployment's replicas with required anti-affinity by hostname on
one node, a JobSet's exclusive placement (alpha.jobset.sigs.k8s.io/exclusive-topology,
whose webhook injects required pod affinity and anti-affinity) across slices. So the PreFilter
refuses such a pod (`pod_terms.refusal`, naming the fields and what to do): it stays pending,
UnschedulableAndUnresolvable, and preemption evicts nothing for it. Preferred terms are not its
business (InterPodAffinity scores them; those it does not are told once by `ClusterState`, see
`pod_terms`).

A profile may disable it (`plugins.preFilter.disabled`, `plugins.filter.disabled` or
`plugins.multiPoint.disabled`, by name):
a pod (anti-)affinity term's non-empty namespaceSelector is then taken to select every namespace
(InterPodAffinity, fail safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from scheduler.core.framework.cycle_state import PodContext
from scheduler.core.framework.handle import Handle
from scheduler.core.framework.interface import PreFilterPlugin, QueueingHint
from scheduler.core.state import EventKind
from scheduler.core.pod_terms import refusal

NAME = "TesseraUnhonouredTerms"


class TesseraUnhonouredTerms(PreFilterPlugin):
    name = NAME
    may_disable: ClassVar[bool] = True

    def __init__(self, handle: Handle) -> None:
        self.state = handle.state

    def queueing_hints(self) -> Mapping[EventKind, QueueingHint]:
        """None: the refusal reads only the pod's own terms, which no cluster event changes (the
        unschedulable pods' periodic flush asks again)."""
        return {}

    def pre_filter(self, ctx: PodContext) -> str | None:
        required = ctx.pod.unhonoured
        if not required:
            return None
        return refusal(required, self.state.asks_gpus(ctx.pod))
