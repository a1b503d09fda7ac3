"""`kubectl tessera explain` / `what-if`, the plugin's cluster resolution and its listing: cases a
review found against upstream's behaviour (kubectl, client-go's kubeconfig loading, kube-scheduler).

Each test failed before its fix, for the reason its docstring gives.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scheduler.kube.http import Response, connect
from scheduler.kube.informers import NODES
from scheduler.kube.snapshot import ListError, list_cluster
from scheduler.kubectl import cli
from scheduler.kubectl import explain as explaining
from scheduler.kubectl import whatif
from scheduler.kubectl.target import resolve
from scheduler.sim import builders as b
from tests.helpers import BINPACK, config

# --- explain: a bound pod being deleted ---------------------------------------------------------


def _deleting(pod: dict[str, Any], *finalizers: str) -> dict[str, Any]:
    pod["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", finalizers=list(finalizers))
    return pod


def test_explain_a_bound_pod_being_deleted_says_terminating_not_bound() -> None:
    """A bound pod with a deletionTimestamp (a finalizer keeps it) read `Status: bound to n1`,
    exactly as a healthy running pod: `_status` tests `node_name` before `meta.deleting`. The
    pending pod's explanation meanwhile names it as "being deleted" and holding the GPUs.
    Upstream: `kubectl describe` (k8s.io/kubectl pkg/describe/describe.go, PodDescriber
    describePod) prints `Status: Terminating` for a pod with a deletionTimestamp that has not
    finished, and `kubectl get` (pkg/printers/internalversion/printers.go printPod) shows
    `Terminating`; the finalizer is what keeps it, so it is named."""
    keeper = _deleting(b.pod("keeper", node_name="n1", limits={"nvidia.com/gpu": 4}, phase="Running"),
                       "example.com/keep")
    objs = [b.node("n1", gpus=4), keeper, b.pod("waiter", limits={"nvidia.com/gpu": 4})]
    result = explaining.explain(objs, "default/keeper", config(BINPACK), [], 0.0)
    assert result is not None
    assert not result.status.startswith("bound"), result.status
    assert result.status.startswith("terminating on n1"), result.status
    assert "example.com/keep" in result.status, result.status


def test_explain_a_terminating_preemption_victim_says_it_was_preempted() -> None:
    """A victim of preemption stays bound while it terminates (its grace period, a finalizer):
    `explain` said `bound to n1`. The scheduler marks it first with upstream's DisruptionTarget
    condition, reason PreemptionByScheduler (k8s.io/kubernetes pkg/scheduler/framework/
    preemption/executor.go prepareCandidate; Tessera: scheduler/kube/evictor.py), and the core
    reads it (`Pod.preempted`): the status should say it is terminating because it was preempted."""
    victim = _deleting(b.pod("victim", node_name="n1", limits={"nvidia.com/gpu": 4}, phase="Running"))
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                       "message": "tessera: preempting to accommodate a higher priority pod",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    result = explaining.explain([b.node("n1", gpus=4), victim], "default/victim", config(BINPACK), [], 0.0)
    assert result is not None
    assert result.status.startswith("terminating on n1"), result.status
    assert "preempted by tessera" in result.status, result.status


# --- explain's dry run: room held for a nominated preemptor ----------------------------------


def test_explain_dry_run_keeps_the_room_of_a_nominated_higher_priority_pod() -> None:
    """`boss` (priority 1000) preempted `victim` and is nominated to n1
    (status.nominatedNodeName) while the victim terminates; `small` (priority 0, 1 GPU) waits.
    The scheduler's core, given the same listing, leaves `small` pending ("Insufficient
    nvidia.com/gpu": n1's room is held for boss), but explain's dry run dropped every other
    pending pod, boss's nomination with it, and said `small` "would go to n1". Upstream:
    a pod is filtered with the nominated pods of equal or higher priority added to their node
    (k8s.io/kubernetes pkg/scheduler/framework/runtime/framework.go RunFilterPluginsWithNominatedPods
    / addGENominatedPods), so "as if it were next" includes their room."""
    victim = _deleting(b.pod("victim", node_name="n1", limits={"nvidia.com/gpu": 2}, phase="Running", priority=0))
    boss = b.pod("boss", limits={"nvidia.com/gpu": 4}, priority=1000)
    boss["status"]["nominatedNodeName"] = "n1"
    objs = [b.node("n1", gpus=4), victim, boss, b.pod("small", limits={"nvidia.com/gpu": 1}, priority=0)]
    result = explaining.explain(objs, "default/small", config(BINPACK), [], 0.0)
    assert result is not None and result.dry_run is not None
    assert result.dry_run.node == "", f"explain says small would go to {result.dry_run.node}"
    assert result.dry_run.nodes == (explaining.NodeVerdict("n1", False, "Insufficient nvidia.com/gpu"),)
    # a nominated pod of *lower* priority holds nothing against it
    boss["spec"]["priority"], small = -1, b.pod("small", limits={"nvidia.com/gpu": 1}, priority=0)
    lower = explaining.explain([*objs[:3], small], "default/small", config(BINPACK), [], 0.0)
    assert lower is not None and lower.dry_run is not None and lower.dry_run.node == "n1"


# --- one gang failure, one wording --------------------------------------------------------------


def test_one_gang_failure_is_worded_one_way_for_every_member() -> None:
    """A gang of 3 where only 2 fit: the members that fit (then undone) said "pod group default/w
    needs 3 members placed together, only 2 fit; ...", the one that found no node "... pod group
    default/w: only 2 of the 3 members it needs fit." — the same fact in two sentences, so
    `explain` on two members of one gang (and what-if's table, and the pods' conditions) read as
    two different failures. Upstream gives the whole group one status
    (k8s.io/kubernetes pkg/scheduler/schedule_one_podgroup.go submitPodGroupAlgorithmResult: one
    `podGroupResult.status`, one PodGroupScheduled condition message). One sentence for the gang,
    on every member."""
    gang = [b.pod(f"w-{i}", limits={"nvidia.com/gpu": 2}, labels=b.gang_labels("w", 3)) for i in range(3)]
    objs = [b.node("n1", gpus=4), b.node("n2", gpus=1), *gang]
    sentence = "pod group default/w: only 2 of the 3 members it needs fit"
    for i in range(3):
        result = explaining.explain(objs, f"default/w-{i}", config(BINPACK), [], 0.0)
        assert result is not None and result.dry_run is not None
        assert sentence in result.dry_run.message, (i, result.dry_run.message)
        assert "placed together" not in result.dry_run.message, (i, result.dry_run.message)
    outcomes = whatif.what_if(objs, config(BINPACK), 0.0).outcomes
    assert [o.node for o in outcomes] == ["", "", ""]
    assert all(sentence in o.message for o in outcomes), [o.message for o in outcomes]


# --- which cluster: KUBECONFIG with several files -----------------------------------------------


def _kubeconfig(path: Path, name: str, server: str, namespace: str) -> Path:
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        current-context: {name}
        contexts: [{{name: {name}, context: {{cluster: {name}, user: {name}, namespace: {namespace}}}}}]
        clusters: [{{name: {name}, cluster: {{server: "{server}"}}}}]
        users: [{{name: {name}, user: {{token: t-{name}}}}}]
        """))
    return path


async def test_kubeconfig_with_several_files_uses_the_first_files_current_context(tmp_path: Path) -> None:
    """KUBECONFIG=prod:dev, each file with its own current-context. kubectl uses prod's (client-go
    tools/clientcmd/loader.go ClientConfigLoadingRules.Load: "The first file to set a particular
    map key wins", and the non-map values are merged in reverse so the first file's
    current-context wins). The plugin took the namespace from prod's context (target.py, first
    wins) but connected with kubernetes-asyncio's merger, where the *last* file's
    current-context wins: it listed the dev cluster while showing prod's namespace."""
    prod = _kubeconfig(tmp_path / "prod", "prod", "https://prod.example:6443", "team-prod")
    dev = _kubeconfig(tmp_path / "dev", "dev", "https://dev.example:6443", "team-dev")
    target = resolve(None, None, None, {"KUBECONFIG": f"{prod}:{dev}"})
    assert target.namespace == "team-prod"
    api = await connect(target.kubeconfig, user_agent=cli.USER_AGENT, context=target.context)
    try:
        assert api.configuration.host == "https://prod.example:6443"
    finally:
        await api.close()
    # --context still chooses, from any of the files
    chosen = resolve(None, "dev", None, {"KUBECONFIG": f"{prod}:{dev}"})
    assert (chosen.context, chosen.namespace) == ("dev", "team-dev")


def test_a_kubeconfig_with_a_malformed_contexts_list_is_one_error_line(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`contexts: 5` in the kubeconfig: `resolve` iterated it before anything could say the file
    is unusable, and the plugin died with `TypeError: 'int' object is not iterable`. kubectl
    refuses such a file with one line (`error: error loading config file ...`, client-go
    tools/clientcmd/loader.go LoadFromFile); the plugin's own rule is `error: ...`, exit 2 for a
    bad kubeconfig (docs/kubectl-tessera.md)."""
    bad = tmp_path / "config"
    bad.write_text("apiVersion: v1\nkind: Config\ncurrent-context: dev\ncontexts: 5\nclusters: []\nusers: []\n")
    status = cli.main(["nodes", "--kubeconfig", str(bad)])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, (status, err)


@pytest.mark.parametrize("flags", [["--context", "nope", "nodes"], ["explain", "p", "--context", "nope"]])
def test_a_context_the_kubeconfig_does_not_define_is_kubectls_line(tmp_path: Path, flags: list[str],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`kubectl tessera --context nope nodes` printed kubernetes-asyncio's `Invalid kube-config
    file. Expected object with name nope in .../contexts list`. `kubectl --context nope get nodes`
    prints `Error in configuration: context was not found for specified context: nope` (client-go
    tools/clientcmd validation.go errContextNotFound, found by ConfirmUsable; kubectl's
    cmdutil.checkErr prefixes clientcmd's configuration errors with `Error in configuration: `,
    k8s.io/kubectl pkg/cmd/util/helpers.go). Exit 2: the plugin's status for a bad kubeconfig."""
    kubeconfig = _kubeconfig(tmp_path / "config", "dev", "https://127.0.0.1:1", "team-dev")
    status = cli.main(["--kubeconfig", str(kubeconfig), *flags])
    assert (status, capsys.readouterr().err) == (
        2, "Error in configuration: context was not found for specified context: nope\n")


# --- the apiserver does not answer --------------------------------------------------------------


class _Silent:
    """Lists answer empty, except `path`, whose request times out as KubeHttp's does (aiohttp's
    total timeout raises a bare TimeoutError)."""

    api = SimpleNamespace(configuration=SimpleNamespace(host="https://apiserver.example:6443"))

    def __init__(self, path: str) -> None:
        self.path = path

    async def request(self, method: str, path: str, **_: Any) -> Response:
        if path == self.path:
            raise TimeoutError()
        return Response(200, b'{"items": [], "metadata": {}}')


async def test_a_list_that_times_out_says_so_in_words() -> None:
    """`kubectl tessera nodes` against an apiserver that stops answering the node list printed
    `error: cannot list nodes: TimeoutError` — the exception's bare class name: no server, no
    time limit. kubectl words a client timeout as a sentence naming the server
    (`Unable to connect to the server: net/http: request canceled (Client.Timeout exceeded ...)`,
    k8s.io/kubectl pkg/cmd/util/helpers.go CheckErr → standardErrorMessage), and the plugin's own
    /version check already says `no answer within 10 s` (scheduler/kube/http.py check_apiserver)."""
    with pytest.raises(ListError) as caught:
        await list_cluster(_Silent(NODES.path))  # type: ignore[arg-type]
    message = str(caught.value)
    assert "TimeoutError" not in message and "https://apiserver.example:6443" in message \
        and "no answer" in message and "within 30 s" in message, message
