"""``bench.cpu_timeline``: which process held a whole core, and when every core was busy, from CPU samples."""

from __future__ import annotations

from bench.cpu_timeline import CpuTimeline


def test_summary_counts_the_spans_a_process_held_a_core_and_those_all_cores_were_busy():
    timeline = CpuTimeline({"ingest1": [], "simulator": []}, cores=2)
    timeline.samples = [  # (time, CPU seconds so far per process)
        (0.0, {"ingest1": 0.0, "simulator": 0.0}),
        (0.1, {"ingest1": 0.1, "simulator": 0.0}),  # the ingest worker alone on one core: one core busy
        (0.2, {"ingest1": 0.2, "simulator": 0.1}),  # both: every core busy
        (0.3, {"ingest1": 0.22, "simulator": 0.12}),  # mostly idle
    ]
    summary = timeline.summary()
    assert summary["one_core_s"] == {"ingest1": 0.2, "simulator": 0.1}
    assert summary["all_cores_s"] == 0.1 and summary["seconds"] == 0.3


def test_a_live_process_is_sampled_until_the_run_ends():
    import os

    import psutil

    with CpuTimeline({"me": [psutil.Process(os.getpid())]}, interval=0.01) as timeline:
        sum(i * i for i in range(200_000))
    assert len(timeline.samples) >= 2 and timeline.samples[-1][1]["me"] >= timeline.samples[0][1]["me"]
    assert set(timeline.summary()["one_core_s"]) == {"me"}
