"""bench.ingest_timeline: the milestones of an ingestion from its calls, and the CPU between them (pure parts)."""

from __future__ import annotations

from bench.ingest_timeline import milestones, windows


def test_milestones_are_read_from_the_calls_and_the_stage_times():
    calls = [(0.10, 0.32, "extract"), (0.20, 0.45, "extract"), (0.33, 0.55, "glean"), (0.46, 0.71, "glean"),
             (0.75, 0.96, "summarize"), (1.08, 1.30, "embed"), (1.25, 1.61, "report"), (1.36, 1.68, "report"),
             (1.75, 1.96, "report")]
    points = milestones(calls, {"report:wave1": 1.70, "finalize": 1.957}, 2.04)
    assert points == [("submitted", 0.0), ("extract sent", 0.10), ("glean answered", 0.71),
                      ("summaries answered", 0.96), ("reports sent", 1.25), ("wave 0 answered", 1.68),
                      ("last report sent", 1.75), ("finalize", 1.957), ("end seen", 2.04)]
    # no LLM (extractive): only what happened is named
    assert milestones([], {"finalize": 0.5}, 0.6) == [("submitted", 0.0), ("finalize", 0.5), ("end seen", 0.6)]


def test_each_window_takes_the_cpu_of_the_samples_nearest_its_ends():
    samples = [(0.0, {"ingest0": 0.0, "simulator": 0.0}), (0.5, {"ingest0": 0.2, "simulator": 0.001}),
               (1.0, {"ingest0": 0.3, "simulator": 0.2})]
    out = windows([("submitted", 0.0), ("a", 0.49), ("b", 1.02)], samples)
    assert out[0] == {"from": "submitted", "to": "a", "start": 0.0, "seconds": 0.49, "cpu_total": 0.201,
                      "cpu": {"ingest0": 0.2}}  # under 5 ms is left out of the listing, not the total
    assert out[1]["cpu"] == {"ingest0": 0.1, "simulator": 0.199} and out[1]["seconds"] == 0.53
    gone = windows([("a", 0.0), ("b", 1.0)], [(0.0, {"ingest0": 0.3}), (1.0, {"ingest0": 0.1})])  # a thread exited
    assert gone[0]["cpu_total"] == 0.0 and gone[0]["cpu"] == {}
