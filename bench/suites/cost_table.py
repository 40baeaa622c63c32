"""Issue 21's cost and latency table, every figure measured in one run (graphfleet vs nano-graphrag).

    .venv/bin/python -m bench.suites.cost_table [--repeat 3] [--peers-python PATH] [--out-dir bench/results]
    .venv/bin/python -m bench.report        # renders the section "Cost and latency per question"
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import systems
from bench.harness.results import PEERS_PYTHON, ROOT, SAMPLE, emit, machine, own_versions, parser
from bench.harness.stacks import simulator

OUT_NAME = "cost_table.jsonl"
SUB_BENCH_TIMEOUT_S = 4 * 3600
# row -> the suite measuring it (run as ``python -m MODULE ARGS --out FILE``) and its arguments
SUB_BENCHES = {  # --peers-python last: the run's --peers-python follows it
    "gateway_local_0": ("bench.suites.gateway_latency", ["--latency", "0"]),
    "global_tokens": ("bench.suites.global_cost", ["--shares", "0.05", "0.1", "--peers-python"]),
    "context_build": ("bench.suites.context_build", ["--peers-python"]),
}


def configs(args) -> list[dict]:
    """The compare runs: (latency, ms per completion token, graphfleet processes, systems); nano runs with the
    first process count only."""
    settings = [(latency, 0.0) for latency in args.latency]
    settings += [(args.token_latency, args.ms_per_completion_token)] if args.ms_per_completion_token else []
    return [{"latency_ms": latency, "ms_per_token": per_token, "processes": procs,
             "systems": ["graphfleet", "nano"] if procs == args.processes[0] else ["graphfleet"]}
            for latency, per_token in settings for procs in args.processes]


def run_config(cfg: dict, args, tag: dict, out: Path) -> None:
    """One simulator, ``--warmup`` unmeasured rounds then ``--repeat`` measured ones (``systems.schedule``), then
    the medians; every record tagged with the configuration."""
    token = f"_{cfg['ms_per_token']:g}ms_per_token" if cfg["ms_per_token"] else ""
    base = {**tag, "row": f"carol_{cfg['latency_ms']:g}ms{token}_p{cfg['processes']}",
            "latency_ms": cfg["latency_ms"], "ms_per_token": cfg["ms_per_token"], "processes": cfg["processes"]}
    rows: list[dict] = []
    with simulator(latency_ms=cfg["latency_ms"], ms_per_completion_token=cfg["ms_per_token"]) as llm:
        for run, system, warm in systems.schedule(cfg["systems"], args.repeat, args.warmup):
            recs = [{**r, **base} for r in systems.run_system(system, llm, SAMPLE, cfg["latency_ms"], run, warm, args,
                                                              args.graphfleet_concurrency, cfg["processes"])]
            emit(recs, out)
            rows += recs
    emit([{**m, **base} for m in systems.medians(rows)], out)


def run_sub_bench(row: str, args, tag: dict) -> list[dict]:
    """Run a row's suite in a subprocess; its records tagged, or a ``cost_missing`` one saying why there are none."""
    module, argv = SUB_BENCHES[row]
    argv = [*argv, args.peers_python] if argv[-1:] == ["--peers-python"] else argv
    cmd = [sys.executable, "-m", module, *argv]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        try:
            proc = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                                  timeout=SUB_BENCH_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            proc = subprocess.CompletedProcess(cmd, -1, "", f"timed out after {exc.timeout} s")
        lines = [json.loads(ln) for ln in out.read_text().splitlines() if ln.strip()] if out.exists() else []
    base = {**tag, "row": row, "module": module, "command": " ".join(["python", *cmd[1:]])}
    recs = [{"system": "graphfleet", **r, **base} for r in lines]
    if proc.returncode != 0 or not recs:
        recs.append({**base, "bench": "cost_missing", "system": "graphfleet",
                     "reason": f"exit {proc.returncode}: {proc.stderr[-1500:]}"})
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
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    args.command = "python -m bench.suites.cost_table " + " ".join(argv)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = args.out_dir / OUT_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = {"run_id": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())}
    started = time.perf_counter()
    emit({**tag, "bench": "cost_run", "row": "run", "system": "all", "command": args.command,
          "repeat": args.repeat, "warmup": args.warmup, "machine": machine(), "graphfleet_versions": own_versions(),
          "peer_versions": systems.peer_versions(args.peers_python) if "compare" in args.rows else {}}, out)
    for cfg in configs(args) if "compare" in args.rows else []:
        run_config(cfg, args, tag, out)
    for row in (row for row in SUB_BENCHES if row in args.rows):
        emit(run_sub_bench(row, args, tag), out)
    emit({**tag, "bench": "cost_run_end", "row": "run", "system": "all",
          "seconds": round(time.perf_counter() - started, 1)}, out)


if __name__ == "__main__":
    main()
