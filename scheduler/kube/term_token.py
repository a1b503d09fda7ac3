"""The `tessera.dev/term` token: which Lease, which holder, which takeover wrote a pod.

`<leaseNamespace>/<leaseName>/<identity>/<leaseTransitions>/<acquireTime>`. A new leader writes it
onto the pods it schedules (the term fence, scheduler/kube/fence.py) and every Binding and
PodScheduled=False write of its term carries it, so a pod tells whoever watches it which term
last wrote it. Two things are read back from it:

* the transition count, against the reader's own term: a newer term of the *same* Lease means
  another replica took over (`LeaderElector.saw_term`);
* the Lease: a token of *another* Lease written onto a pod of our scheduler names, or brought by
  the Binding of a pod of another name, means a second Tessera leads on another Lease and binds
  onto the same nodes — two installs that can give one GPU to two pods (the loop reports it:
  `leader.conflicting_scheduler`).

Why the Lease comes first: namespaces and names never contain "/", so it parses from the left and
the transitions and acquireTime from the right, whatever an `--identity` holds. Tokens written
before the Lease was part of them (`<identity>/<leaseTransitions>/<acquireTime>`) still parse, with
no Lease: a rolling upgrade reads the old replica's tokens as its own Lease's, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.api.names import DNS_LABEL, DNS_SUBDOMAIN


@dataclass(frozen=True)
class TermToken:
    lease: str | None  # "namespace/name"; None in a token of the format before it named its Lease
    identity: str
    transitions: int
    acquire_time: str

    def of_lease(self, lease: str | None) -> bool:
        """Whether this token may be of Lease `lease` ("namespace/name"): a token of the format
        before tokens named their Lease, or no Lease to compare with, counts as any (a rolling
        upgrade reads the old replica's tokens as its own Lease's). Its opposite is a second
        install's token."""
        return self.lease is None or lease is None or self.lease == lease


def term_token(namespace: str, name: str, identity: str, transitions: int, acquire_time: str) -> str:
    """The token of the term `identity` leads on Lease `namespace/name` since its takeover
    number `transitions` at `acquire_time` (unique per takeover, even after a Lease deleted by
    hand restarted the count)."""
    return f"{namespace}/{name}/{identity}/{transitions}/{acquire_time}"


def parse_term_token(token: str) -> TermToken | None:
    """`token` read back; None for anything that is not a term's token (a withdrawal's
    `<identity>/withdrawn/<resourceVersion>`, a value a user wrote). A token naming no replica
    (`/1/x`, `ns/lease//1/x`) is a user's value too: no term has an empty identity (the elector
    refuses one, as client-go's "Lock identity is empty"), and read as one it made a leader doubt
    its term and explain name a replica "" as the pod's writer."""
    parts = token.split("/")
    if len(parts) < 3 or not parts[-2].isdigit():
        return None
    transitions, acquire_time = int(parts[-2]), parts[-1]
    head = parts[:-2]
    lease = None
    if len(head) >= 3 and DNS_LABEL.fullmatch(head[0]) and DNS_SUBDOMAIN.fullmatch(head[1]):
        lease, head = f"{head[0]}/{head[1]}", head[2:]
    identity = "/".join(head)
    return TermToken(lease, identity, transitions, acquire_time) if identity else None
