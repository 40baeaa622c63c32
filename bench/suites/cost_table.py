"""Issue 21's cost and latency table, every figure measured in one run (graphfleet vs nano-graphrag).

    .venv/bin/python -m bench.suites.cost_table [--repeat 3] [--peers-python PATH] [--out-dir bench/results] [--quick]
    .venv/bin/python -m bench.report        # renders the section "Cost and latency per question"
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import systems as compare
from bench.harness.results import PEERS_PYTHON, ROOT, SAMPLE, emit, machine, own_versions, parser
from bench.harness.stacks import simulator
from graphfleet_cli.stack import WORKER_GROUPS, available_cores, plan_workers

OUT_NAME = "cost_table.jsonl"
SUB_BENCH_TIMEOUT_S = 4 * 3600
# the simulator's call kinds -> the stages of graphfleet's usage records (``bench.harness.llm_calls.stage_spans``)
STAGE_OF = {"extract": "extract", "glean_continue": "glean", "glean_loop": "glean", "summarize": "summarize",
            "community_report": "report"}


@dataclass(frozen=True)
class SubBench:
    """A row's bench, run as ``python -m module *args --out FILE``; ``quick``: added with ``--quick``."""

    module: str
    args: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()


# row -> its bench; switch a row to another bench here
SUB_BENCHES = {
    "gateway_local_0": SubBench("bench.suites.gateway_latency", ("--latency", "0"),
                                ("--repeat", "5", "--trials", "1", "--ingestions", "1", "--idle", "0")),
    "global_tokens": SubBench("bench.suites.global_cost", ("--shares", "0.05", "0.1"),
                              ("--corpora", "carol", "--questions", "2")),
    "context_build": SubBench("bench.suites.context_build", (), ("--repeat", "5")),
}


def configs(args) -> list[dict]:
    """The compare runs: (latency, ms per completion token, graphfleet processes, systems); nano runs with the
    first process count only."""
    settings = [(latency, 0.0) for latency in ([0.0] if args.quick else args.latency)]
    settings += [(args.token_latency, args.ms_per_completion_token)] if args.ms_per_completion_token else []
    return [{"latency_ms": latency, "ms_per_token": per_token, "processes": procs,
             "systems": ["graphfleet", "nano"] if procs == args.processes[0] else ["graphfleet"]}
            for latency, per_token in settings for procs in args.processes]


def run_config(cfg: dict, args, tag: dict, out: Path) -> None:
    """One simulator, ``--warmup`` unmeasured rounds then ``--repeat`` measured ones (``compare.schedule``),
    then the medians and the critical path; every record tagged with the configuration."""
    token = f"_{cfg['ms_per_token']:g}ms_per_token" if cfg["ms_per_token"] else ""
    base = {**tag, "row": f"carol_{cfg['latency_ms']:g}ms{token}_p{cfg['processes']}",
            "latency_ms": cfg["latency_ms"], "ms_per_token": cfg["ms_per_token"],
            "processes": cfg["processes"], "ingest_processes": ingest_processes(cfg["processes"])}
    rows: list[dict] = []
    with simulator(latency_ms=cfg["latency_ms"], ms_per_completion_token=cfg["ms_per_token"]) as llm:
        for run, system, warm in compare.schedule(cfg["systems"], args.repeat, args.warmup):
            recs = [{**r, **base} for r in compare.run_system(system, llm, SAMPLE, cfg["latency_ms"], run, warm, args,
                                                              args.graphfleet_concurrency, cfg["processes"])]
            emit(recs, out)
            rows += recs
    from shared.config import get_settings

    medians = [{**m, **base} for m in compare.medians(rows)]
    # LLM calls in flight: per graphfleet worker process (the flag, else the configured default), times the processes
    in_flight = args.graphfleet_concurrency or get_settings().workers.llm_concurrency
    path = critical_path(cfg, medians, rows, in_flight * base["ingest_processes"])
    emit(medians + ([{**base, **path}] if path else []), out)


def ingest_processes(processes: int | str) -> int:
    """The ingest group's process count for a ``--processes`` value: ``auto`` starts one per core there."""
    if processes != "auto":
        return int(processes)
    from shared.config import get_settings

    w = get_settings().workers
    return plan_workers(WORKER_GROUPS, "auto", available_cores(), None, w.llm_concurrency,
                        w.cpu_concurrency)["ingest"].processes


def _waves(calls_by_type: dict, stage_times: dict | None) -> tuple[list[str], str]:
    """The sequential LLM waves of one ingestion, and where the report waves' count came from."""
    calls = {k: v["calls"] for k, v in (calls_by_type or {}).items()}
    extract = calls.get("extract", 0)
    if not extract:
        return [], "no extraction calls"
    waves = ["extract"] + [kind for kind in ("glean_continue", "glean_loop")  # per chunk, one after another
                           for _ in range(math.ceil(calls.get(kind, 0) / extract))]
    waves += ["summarize"] if calls.get("summarize") else []
    report_waves = sorted(k for k in (stage_times or {}) if k.startswith("report"))
    if report_waves:
        return waves + ["community_report"] * len(report_waves), "stage timeline"
    return waves + ["community_report"] * 2, "issue 21's estimate (2 report waves; no stage timeline recorded)"


def longest_chain_s(waves: list[str], stages: dict, latency_ms: float, ms_per_token: float) -> float | None:
    """A lower bound on the LLM waves one after another, from each stage's shortest and longest answer (a call of
    ``n`` completion tokens lasts the latency plus ``n × ms_per_token``): the chunk holding the longest extraction
    (or gleaning) answer takes that call plus at least the shortest of its other rounds; the summary wave lasts
    at least its longest call; of the report waves one holds the longest report, each other at least the
    shortest. None when a wave's stage has no record."""
    if not all((stages.get(STAGE_OF.get(kind, "")) or {}).get("completion_max") is not None for kind in waves):
        return None

    def bound(kinds: list[str]) -> float:  # one of the waves holds its stage's longest call, the rest the shortest
        low, high = ([(latency_ms + ms_per_token * stages[STAGE_OF[k]][f"completion_{end}"]) / 1000 for k in kinds]
                     for end in ("min", "max"))
        return max((sum(low) - low[i] + high[i] for i in range(len(kinds))), default=0.0)

    chunk = [k for k in waves if STAGE_OF[k] in ("extract", "glean")]
    reports = [k for k in waves if STAGE_OF[k] == "report"]
    return bound(chunk) + sum(bound([k]) for k in waves if k not in chunk and k not in reports) + bound(reports)


def _measured(rows: list[dict], field: str):
    """``field`` of the first measured (not warm-up) graphfleet ingestion that recorded it, else None."""
    return next((r[field] for r in rows if r["bench"] == "compare_ingest" and not r.get("warmup")
                 and r["system"] == "graphfleet" and r.get(field)), None)


def critical_path(cfg: dict, medians: list[dict], rows: list[dict], in_flight: int | None = None) -> dict | None:
    """graphfleet's ingestion against the time its LLM waves alone take one after another: each wave at least
    its longest call where the run recorded its calls' answers (``longest_chain_s``), else an average call of
    its kind; and, with ``in_flight`` calls at most at a time, each wave in ``ceil(calls / in_flight)`` rounds
    of average calls (a kind's calls split evenly over its waves)."""
    gf = next((m for m in medians if m["phase"] == "ingest" and m["system"] == "graphfleet"), None)
    if not (cfg["latency_ms"] or cfg["ms_per_token"]) or gf is None:
        return None
    timeline, stages = _measured(rows, "stage_times"), _measured(rows, "llm_stages")
    by_type = gf.get("calls_by_type") or {}
    waves, source = _waves(by_type, timeline)

    def wave_s(kind: str) -> float:
        v = by_type.get(kind) or {"calls": 1, "completion_tokens": 0}
        return (cfg["latency_ms"] + cfg["ms_per_token"] * v["completion_tokens"] / max(1, v["calls"])) / 1000

    def rounds(kind: str) -> int:
        return math.ceil(math.ceil((by_type.get(kind) or {"calls": 1})["calls"] / waves.count(kind)) / in_flight)

    average = round(sum(wave_s(k) for k in waves), 3)
    chain = longest_chain_s(waves, stages or {}, cfg["latency_ms"], cfg["ms_per_token"]) if waves else None
    seconds = average if chain is None else round(max(chain, average), 3)
    return {"bench": "critical_path", "system": "graphfleet", "waves": waves, "waves_source": source,
            "stage_times": timeline, "seconds": seconds, "graphfleet_s": gf["seconds_median"],
            "average_waves_s": average, "longest_calls": chain is not None,
            "ratio": round(gf["seconds_median"] / seconds, 2) if seconds else None, "in_flight": in_flight,
            "in_flight_bound_s": round(sum(wave_s(k) * rounds(k) for k in waves), 3) if in_flight else None,
            # measured: graphfleet's wall time split by whether one of its LLM calls was in flight (llm_calls)
            **{k: gf[k] for k in ("llm_in_flight_s", "llm_idle_s", "simulator_cpu_s") if gf.get(k) is not None}}


def _help(module: str) -> str:
    proc = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    return proc.stdout if proc.returncode == 0 else ""


def _module_exists(module: str) -> bool:
    return (ROOT / Path(*module.split("."))).with_suffix(".py").exists()


def sub_bench_args(bench: SubBench, args) -> list[str]:
    """The bench's arguments, ``--peers-python`` when its ``--help`` lists it, and with ``--quick`` its quick
    options that its ``--help`` lists (with their values; a full run keeps each bench's own sample sizes)."""
    text = _help(bench.module)
    out = [*bench.args, *(["--peers-python", args.peers_python] if "--peers-python" in text else [])]
    keep = True
    for a in bench.quick if args.quick else ():
        keep = a in text if a.startswith("--") else keep
        out += [a] if keep else []
    return out


def run_sub_bench(row: str, args, tag: dict) -> list[dict]:
    """Run a row's bench in a subprocess; its records, tagged, or a ``cost_missing`` one."""
    bench = SUB_BENCHES[row]
    base = {**tag, "row": row, "module": bench.module}
    if not _module_exists(bench.module):
        return [{**base, "bench": "cost_missing", "system": "graphfleet",
                 "reason": f"no {bench.module} in this checkout"}]
    cmd = [sys.executable, "-m", bench.module, *sub_bench_args(bench, args)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        started = time.perf_counter()
        try:
            proc = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                                  timeout=SUB_BENCH_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            proc = subprocess.CompletedProcess(cmd, -1, "", f"timed out after {exc.timeout} s")
        lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()] if out.exists() else []
    command = " ".join(["python", *cmd[1:]])
    recs = [{"system": "graphfleet", **r, **base, "command": command} for r in lines]
    if proc.returncode != 0 or not recs:
        recs.append({**base, "bench": "cost_missing", "system": "graphfleet", "command": command,
                     "reason": f"exit {proc.returncode} after {time.perf_counter() - started:.0f} s: "
                               f"{proc.stderr[-1500:]}"})
    return recs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = parser(__doc__, out=False, repeat=3, processes=[1, 2, "auto"], ms_per_completion_token=12.5,
                peers_python=PEERS_PYTHON)
    ap.add_argument("--concurrency", type=int, default=16, help="LLM calls in flight for nano-graphrag (its default)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured runs of each system first on each simulator (it memoizes its analysis)")
    ap.add_argument("--latency", type=float, nargs="*", default=[0.0, 200.0],
                    help="ms per call (none: only the per-token run)")
    ap.add_argument("--token-latency", type=float, default=0.0, help="latency per call at that setting, ms")
    ap.add_argument("--graphfleet-concurrency", type=int, default=0,
                    help="threads per graphfleet worker process (0: its configured default, workers.llm_concurrency)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--rows", nargs="+", default=["compare", *SUB_BENCHES], choices=["compare", *SUB_BENCHES],
                    help="measure only these parts (default: all)")
    ap.add_argument("--quick", action="store_true", help="one run, latency 0, short sub-benches (a smoke test)")
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    if args.quick:  # the per-token run only when asked for
        args.repeat, args.warmup = 1, 0
        args.ms_per_completion_token = args.ms_per_completion_token if "--ms-per-completion-token" in argv else None
    args.command = "python -m bench.suites.cost_table " + " ".join(argv)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out_dir / OUT_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = {"run_id": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), "quick": args.quick}
    started = time.perf_counter()
    emit({**tag, "bench": "cost_run", "row": "run", "system": "all", "command": args.command,
          "repeat": args.repeat, "warmup": args.warmup, "machine": machine(), "graphfleet_versions": own_versions(),
          "peer_versions": compare.peer_versions(args.peers_python) if "compare" in args.rows else {}}, out)
    for cfg in configs(args) if "compare" in args.rows else []:
        run_config(cfg, args, tag, out)
    for row in (row for row in SUB_BENCHES if row in args.rows):
        emit(run_sub_bench(row, args, tag), out)
    emit({**tag, "bench": "cost_run_end", "row": "run", "system": "all",
          "seconds": round(time.perf_counter() - started, 1)}, out)


if __name__ == "__main__":
    main()
