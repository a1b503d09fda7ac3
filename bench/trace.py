"""`python -m bench.trace`: packing quality on the Alibaba 2023 GPU trace, policies side by side.

Why a benchmark and not a test: the numbers are comparisons (our policies against each other and
against the FGD paper's published ones), read by people; nothing here asserts a threshold.
Methodology, metric definitions and their sources: bench/README.md.

Runs are independent (one policy × one seed, each with its own Scheduler), so they are spread
over worker processes (`--jobs`, 2 by default for this 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import trace_analogues
from bench.pool import run_pool
from bench.trace_fgd import run_fgd
from bench.trace_metrics import summarize
from bench.trace_policies import BY_NAME, POLICIES, Policy, config_for, duplicates, from_file, select
from bench.trace_report import SUITE_REFERENCE, REFERENCE, markdown_table, plot, policy_results, suite_plot, suite_table
from bench.trace_run import RunResult, run_offline, run_once
from bench.trace_slices import slice_reference
from bench.trace_workload import (NODE_COLUMNS, POD_COLUMNS, POD_COLUMNS_NOT_NEEDED, TraceError, TraceNode, TracePod,
                                  arrival_sequence, offline_order, pod_lines, read_nodes, read_pods, subsample,
                                  unknown_models, unplaceable, unread_columns)
from scheduler.api.config import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
TRACE_DIR_ENV = "TESSERA_TRACE_DIR"
NODES_CSV = "openb_node_list_gpu_node.csv"
PODS_CSV = "openb_pod_list_default.csv"
DEFAULT_OUT = REPO_ROOT / "bench" / "out" / "trace"
QUICK_STEP = 10  # --quick keeps every 10th node and every 10th pod
UNPLACEABLE_SHOWN = 3  # pods named in the warning about pods no node can hold; the rest are counted
# bench/README.md "Getting the trace": the Alibaba trace's terms, carried by what is made from it
DATA_ATTRIBUTION = ("Data: Alibaba cluster-trace-gpu-v2023 (github.com/alibaba/clusterdata), research/study use only; "
                    "cite Q. Weng et al., Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation "
                    "Gradient Descent, USENIX ATC 2023")
ONE_SEED = ("One seed: not comparable with the paper's figures, a median over ten seeds (42-51); a single seed's "
            "order is not FGD's (bench/README.md, Known differences from FGD's runs).")


SUITES = ("variants", "analogues")
SUITE_PUBLISHED: dict[str, dict[str, dict[str, float]]] = {
    "variants": SUITE_REFERENCE,
    "analogues": {trace_analogues.analogue(name): figures for name, figures in trace_analogues.PUBLISHED.items()},
}


def trace_dir() -> Path:
    """`../shared/data/alibaba-gpu-v2023/` from the repo root, unless TESSERA_TRACE_DIR says otherwise.
    A directory that is not there is an error that says how to point at the right one (a new
    user's trial got only "[Errno 2] No such file or directory: …/openb_node_list_gpu_node.csv")."""
    override = os.environ.get(TRACE_DIR_ENV)
    directory = Path(override) if override else (REPO_ROOT / ".." / "shared" / "data" / "alibaba-gpu-v2023").resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"no trace directory {directory}: set ${TRACE_DIR_ENV} to the folder holding "
                                f"{NODES_CSV} and {PODS_CSV}")
    return directory


def parse_seeds(text: str) -> list[int]:
    """`42-51`, `42`, `42,45,50-51` → seeds in the order given, without repeats."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "-" in part.lstrip("-"):
                low, high = part.split("-", 1)
                span = range(int(low), int(high) + 1)
                if not span:
                    raise ValueError
                seeds.extend(span)
            else:
                seeds.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad seed list {text!r} (want e.g. 42-51, 42 or 42,45)") from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds given")
    return list(dict.fromkeys(seeds))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trace",
        description="Packing quality of Tessera policies on the Alibaba GPU trace (FGD paper methodology).")
    parser.add_argument("--nodes", type=Path, help=f"node CSV (default: <trace dir>/{NODES_CSV}; "
                        f"trace dir = ${TRACE_DIR_ENV} or ../shared/data/alibaba-gpu-v2023 from the repo root)")
    parser.add_argument("--pods", type=Path, help=f"pod CSV (default: <trace dir>/{PODS_CSV})")
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"),
                        help="shuffle seeds: 42-51 (default), 42, or 42,45,50-51")
    parser.add_argument("--policies", help=f"comma-separated, from: {', '.join(p.name for p in POLICIES)} "
                        f"(default: {', '.join(p.name for p in POLICIES if p.default)})")
    parser.add_argument("--inflate", type=float, default=1.3,
                        help="top the workload up to this multiple of cluster GPU capacity (default 1.3, as FGD; "
                             "0: no top-up, the trace's pods once each in shuffled order; a trace above it is trimmed)")
    parser.add_argument("--sample", action="store_true",
                        help="keep each config's percentageOfNodesToScore (default: score all nodes, as FGD)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke test: first seed only, every {QUICK_STEP}th node and pod")
    parser.add_argument("--suite", choices=SUITES,
                        help="run every trace of a suite: `variants` = the default trace and the variants/ folder "
                             "(gpuspec, gpushare, multigpu, cpu families); `analogues` = the eight FGD-artifact "
                             "variants that folder lacks, rebuilt by their families' rules (bench/trace_analogues.py); "
                             "one table against the published figures")
    add_config_option(parser)
    parser.add_argument("--traces", help="with --suite: only these traces, comma-separated (e.g. gpuspec20,multigpu30)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    return parser


# --- workers ---------------------------------------------------------------------------------

_WORKLOAD: dict[str, Any] = {}
Task = tuple[str, str, int]  # (trace, policy, seed)


def _init_worker(nodes: list[TraceNode], traces: dict[str, list[TracePod]], inflate: float,
                 score_all: bool, files: dict[str, Path]) -> None:
    """`files`: the --config policies by name (workers are spawned: they rebuild them from the path)."""
    _WORKLOAD.update(nodes=nodes, traces=traces, inflate=inflate, score_all=score_all, sequences={},
                     files={name: from_file(path) for name, path in files.items()})


def _sequence(trace: str, seed: int, offline: bool) -> list[TracePod]:
    sequences: dict[tuple[str, int], list[TracePod]] = _WORKLOAD["sequences"]
    total_gpus = sum(n.gpus for n in _WORKLOAD["nodes"])
    if (trace, seed) not in sequences:
        sequences[trace, seed] = arrival_sequence(_WORKLOAD["traces"][trace], total_gpus, seed, _WORKLOAD["inflate"])
    return offline_order(sequences[trace, seed], total_gpus) if offline else sequences[trace, seed]


def _run_task(task: Task) -> RunResult:
    trace, name, seed = task
    policy = _WORKLOAD["files"].get(name) or BY_NAME[name]
    if policy.build is None:
        sequence = _sequence(trace, seed, offline=False)
        return replace(run_fgd(name, seed, _WORKLOAD["nodes"], sequence, _WORKLOAD["traces"][trace]), trace=trace)
    config = config_for(policy, _WORKLOAD["score_all"])
    run = run_offline if policy.offline else run_once
    return replace(run(name, config, seed, _WORKLOAD["nodes"], _sequence(trace, seed, policy.offline)), trace=trace)


def run_all(tasks: Sequence[Task], jobs: int, init_args: tuple[Any, ...]) -> list[RunResult]:
    """Run every (trace, policy, seed), reporting each finished run with its pods/s on stderr."""
    results: list[RunResult] = []
    start = time.perf_counter()

    def progress(result: RunResult) -> None:
        results.append(result)
        done = len(results)
        elapsed = time.perf_counter() - start
        eta = elapsed / done * (len(tasks) - done)
        at_100 = result.metrics.unallocated_gpu_pct_at_100
        where = f"{result.trace}: " if len({task[0] for task in tasks}) > 1 else ""
        print(f"[{done}/{len(tasks)}] {where}{result.policy:<16} seed {result.seed}: {result.pods} pods, "
              f"{result.failed} failed, unallocated@100 {'-' if at_100 is None else f'{at_100:.2f} %'}, "
              f"{result.pods_per_second:.0f} pods/s ({result.elapsed_seconds:.1f} s wall, "
              f"{result.pods_per_cpu_second:.0f} pods per CPU-s); "
              f"elapsed {elapsed:.0f} s, ~{eta:.0f} s left", file=sys.stderr, flush=True)

    run_pool(tasks, _run_task, _init_worker, init_args, jobs, progress)
    return results


# --- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        policies = config_policies(args.policies, args.config)
    except (ValueError, ConfigError) as err:
        print(f"bench.trace: {err}", file=sys.stderr)
        return 2
    try:
        nodes_path = args.nodes or trace_dir() / NODES_CSV
        nodes = read_nodes(nodes_path)
        if args.suite:
            traces, pods = suite_pods(args.suite)
            if args.traces:
                traces, pods = only(traces, pods, args.traces)
        elif args.traces:
            raise TraceError("--traces selects traces of a --suite; give a single trace with --pods")
        else:
            traces = {_trace_name(args.pods): str(args.pods or trace_dir() / PODS_CSV)}
            pods = {name: read_pods(Path(path)) for name, path in traces.items()}
        warnings = input_warnings(nodes_path, nodes, traces, pods)
    except (OSError, TraceError) as err:
        print(f"bench.trace: {err}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"bench.trace: warning: {warning}", file=sys.stderr)
    seeds: list[int] = args.seeds
    if args.quick:
        nodes, seeds = subsample(nodes, QUICK_STEP), seeds[:1]
        pods = {name: subsample(rows, QUICK_STEP) for name, rows in pods.items()}
    if not nodes or not all(pods.values()):
        print("bench.trace: the node and pod files must each have at least one row", file=sys.stderr)
        return 1
    score_all = not args.sample
    for first, second in duplicates(policies, score_all):
        print(f"bench.trace: note: {second} resolves to the same scoring as {first}; expect identical results",
              file=sys.stderr)
    total_gpus = sum(n.gpus for n in nodes)
    print(f"bench.trace: {len(nodes)} nodes, {total_gpus} GPUs, {len(pods)} trace(s) of "
          f"{'/'.join(str(len(rows)) for rows in pods.values())} pods; "
          f"{len(policies)} policies x {len(seeds)} seeds, {args.jobs} jobs", file=sys.stderr, flush=True)

    wall_start = time.perf_counter()
    tasks = [(trace, p.name, seed) for trace in pods for p in policies for seed in seeds]
    files = {p.name: p.path for p in policies if p.path is not None}
    results = run_all(tasks, args.jobs, (nodes, pods, args.inflate, score_all, files))
    wall = time.perf_counter() - wall_start
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    run = {"wall_seconds": round(wall, 1), "jobs": args.jobs, "policies": {p.name: p.summary for p in policies}}
    workload = {"nodes_csv": str(nodes_path), "nodes": len(nodes), "gpus": total_gpus, "seeds": seeds,
                "inflation_ratio": args.inflate, "quick": args.quick,
                "percentage_of_nodes_to_score": 100 if score_all else "as configured"}
    attribution = DATA_ATTRIBUTION if is_alibaba_trace(nodes_path, traces) else None
    if args.suite:
        by_trace = {trace: policy_results([r for r in results if r.trace == trace], [p.name for p in policies])
                    for trace in pods}
        slices = {trace: slice_summaries(rows, total_gpus, seeds, args.inflate) for trace, rows in pods.items()}
        # a --quick sample is not the traces the artifact's figures were measured on: no comparison
        published = {} if args.quick else SUITE_PUBLISHED[args.suite]
        document: dict[str, Any] = {"suite": args.suite, "traces": by_trace, "slice_reference": slices,
                                    "reference": published or None, "workload": {**workload, "pods_csv": traces},
                                    "run": run, "data": attribution}
        (out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        figure = out / "suite.png"
        suite_plot(by_trace, slices, published, figure, f"{args.suite} suite on {len(nodes)} nodes / {total_gpus} GPUs, "
                                      f"{len(seeds)} seed(s)", note=attribution or "")
        print(suite_table(by_trace, slices, published))
        if args.quick:
            print("\n(The FGD artifact's published figures are for the full traces and are not shown: --quick runs "
                  f"every {QUICK_STEP}th node and pod.)")
    else:
        (name, pods_file), = traces.items()
        pods_path = Path(pods_file)
        by_policy = policy_results(results, [p.name for p in policies])
        default_trace = pods_path.name == PODS_CSV and not args.quick
        # the sequence the online policies ran (the offline reference runs only its arrived prefix)
        offline = {p.name for p in policies if p.offline}
        pods_per_seed = {r.seed: r.pods for r in results if r.policy not in offline}
        document = {
            "policies": by_policy,
            "reference": REFERENCE if default_trace else None,  # as the table: shown for the full default trace only
            "workload": {**workload, "pods_csv": str(pods_path), "trace_pods": len(pods[name]),
                         "pods_per_seed": {str(seed): pods_per_seed[seed] for seed in seeds if seed in pods_per_seed}},
            "run": run,
            "data": attribution,
        }
        (out / "results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        figure = out / "allocation.png"
        plot(by_policy, figure, f"{pods_path.name} on {len(nodes)} nodes / {total_gpus} GPUs, {len(seeds)} seed(s)",
             note=attribution or "")
        print(markdown_table(by_policy, with_reference=default_trace))
        if not default_trace:
            print("\n(FGD's published reference rows are for the full default trace and are not shown.)")
    if len(seeds) == 1:
        print(f"\n{ONE_SEED}")
    print(f"\nbench.trace: {len(results)} runs in {wall:.0f} s; wrote {out / 'results.json'} and {figure}",
          file=sys.stderr)
    return 0


def input_warnings(nodes_path: Path, nodes: Sequence[TraceNode], traces: dict[str, str],
                   pods: dict[str, list[TracePod]]) -> list[str]:
    """What a custom CSV gets wrong without an error: columns that are not read (a `model`
    column where `gpu_spec` was meant), `gpu_spec` models no node has (a typo: those pods
    never fit), with the pods per model, and pods no node can hold (one warning per trace with
    the count and the first rows: a shipped variant has two). `traces`: each trace's source, a
    file or how it was built."""
    said = []
    sources = [(nodes_path, NODE_COLUMNS, ())] + [(Path(source), POD_COLUMNS, POD_COLUMNS_NOT_NEEDED)
                                                 for source in traces.values() if Path(source).is_file()]
    for path, read, not_needed in sources:
        unread = unread_columns(path, read, not_needed)
        if unread:
            known = (f" (the trace's {', '.join(not_needed)} are known and not needed)" if not_needed else "")
            said.append(f"{path}: column(s) not read: {', '.join(unread)}; the columns read are "
                        f"{', '.join(read)}{known}")
    models = ", ".join(sorted({node.model for node in nodes if node.model})) or "no model"
    for name, rows in pods.items():
        unknown = unknown_models(nodes, rows)
        if unknown:
            listed = ", ".join(f"{model} ({count} pod{'' if count == 1 else 's'})" for model, count in unknown.items())
            said.append(f"{traces.get(name, name)}: gpu_spec names GPU models no node has: {listed}; the nodes have "
                        f"{models} (a pod none of whose models a node has never fits)")
        never = unplaceable(nodes, rows)
        if never:
            source = traces.get(name, name)
            is_file = Path(source).is_file()
            lines = pod_lines(Path(source)) if is_file else {}
            shown = ", ".join(f"{lines[pod.name] + ' ' if pod.name in lines else ''}{pod.name} ({pod.num_gpu} "
                              f"GPU{'' if pod.num_gpu == 1 else 's'}"
                              f"{' of ' + '|'.join(pod.gpu_spec) if pod.num_gpu and pod.gpu_spec else ''}, "
                              f"{pod.cpu_milli}m CPU, {pod.memory_mib}Mi)" for pod in never[:UNPLACEABLE_SHOWN])
            more = f" and {len(never) - UNPLACEABLE_SHOWN} more" if len(never) > UNPLACEABLE_SHOWN else ""
            label = source if is_file else f"{name} ({source})"
            said.append(f"{label}: {len(never)} pod{'' if len(never) == 1 else 's'} no node can ever hold (no node "
                        f"has enough GPUs of their models, CPU and memory at once): {shown}{more}; the nodes hold at "
                        f"most {max(n.gpus for n in nodes)} GPUs, {max(n.cpu_milli for n in nodes)}m CPU, "
                        f"{max(n.memory_mib for n in nodes)}Mi")
    return said


def is_alibaba_trace(nodes_path: Path, traces: dict[str, str]) -> bool:
    """The input is Alibaba's trace files (by their names) or built from them (a suite): its
    outputs carry DATA_ATTRIBUTION; a custom CSV's do not."""
    return nodes_path.name == NODES_CSV and all(
        not Path(source).is_file() or Path(source).name.startswith("openb_pod_list_") for source in traces.values())


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """`--config FILE`, the one definition bench.trace and bench.churn share; `config_policies`
    turns it and `--policies` into the policies to run."""
    parser.add_argument("--config", type=Path, action="append", default=[], metavar="FILE",
                        help="also run this KubeSchedulerConfiguration file as a policy named after the file "
                             "(repeatable; e.g. a candidate default beside --policies tessera-default); "
                             "without --policies only the files run")


def config_policies(names: str | None, files: Sequence[Path]) -> list[Policy]:
    """`--policies` and `--config`: the named policies (the default set when neither is given),
    then one per file, each file read now so that a bad one stops the run before it starts."""
    policies = select(names) if names or not files else []
    for path in files:
        policy = from_file(path)
        if policy.name in BY_NAME or policy.name in {p.name for p in policies}:
            taken = "a built-in policy has" if policy.name in BY_NAME else "another --config file has"
            raise ValueError(f"--config {path}: {taken} the name {policy.name!r}; rename the file")
        assert policy.build is not None  # a file is always a Tessera configuration
        policy.build()
        policies.append(policy)
    return policies


def only(traces: dict[str, str], pods: dict[str, list[TracePod]],
         names: str) -> tuple[dict[str, str], dict[str, list[TracePod]]]:
    """The suite's traces named in `--traces`, in the suite's order."""
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in pods]
    if unknown or not wanted:
        raise TraceError(f"--traces: unknown trace(s) {', '.join(unknown) or '(none given)'}; "
                         f"this suite has {', '.join(pods)}")
    return ({name: source for name, source in traces.items() if name in wanted},
            {name: rows for name, rows in pods.items() if name in wanted})


def slice_summaries(pods: Sequence[TracePod], total_gpus: int, seeds: Sequence[int],
                    inflate: float) -> dict[str, dict[str, float | None]]:
    """The slice-packing reference (`bench/trace_slices.py`) of one trace, median (min–max) over
    the same arrival orders the policies ran."""
    per_seed = [slice_reference(arrival_sequence(pods, total_gpus, seed, inflate), total_gpus) for seed in seeds]
    return {key: summarize(row[key] for row in per_seed) for key in per_seed[0]} if per_seed else {}


def _trace_name(pods: Path | None) -> str:
    return "default" if pods is None else pods.stem.removeprefix("openb_pod_list_")


def suite_traces(suite: str) -> dict[str, Path]:
    """The pod lists of the `variants` suite: the default trace plus every file of the
    variants/ folder (their published FGD-artifact figures are in SUITE_REFERENCE)."""
    if suite != "variants":
        raise TraceError(f"unknown suite {suite!r} (known: {', '.join(SUITES)})")
    folder = trace_dir() / "variants"
    files = sorted(folder.glob("openb_pod_list_*.csv"))
    if not files:
        raise TraceError(f"{folder}: no openb_pod_list_*.csv variant files")
    return {"default": trace_dir() / PODS_CSV, **{_trace_name(path): path for path in files}}


def suite_pods(suite: str) -> tuple[dict[str, str], dict[str, list[TracePod]]]:
    """Each trace of a suite: where it comes from (a file, or how it was built) and its pods."""
    if suite == "analogues":
        default, gpuspec20 = trace_dir() / PODS_CSV, trace_dir() / "variants" / "openb_pod_list_gpuspec20.csv"
        built = trace_analogues.build(read_pods(default), read_pods(gpuspec20))
        sources = {name: f"built by bench/trace_analogues.py from "
                         f"{gpuspec20 if name.startswith('gpuspec') else default}" for name in built}
        return sources, built
    paths = suite_traces(suite)
    return {name: str(path) for name, path in paths.items()}, {name: read_pods(path) for name, path in paths.items()}


if __name__ == "__main__":
    sys.exit(main())
