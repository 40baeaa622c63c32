"""How many worker processes ``graphfleet up`` starts per queue group (a pure function of the cores)."""

from __future__ import annotations

import argparse

import pytest

from graphfleet_cli.stack import MAX_AUTO_CHILDREN, GroupPlan, available_cores, parse_processes, plan_workers
from shared.infra.messaging.queueing import WORKER_GROUPS


def plan(processes, cores, concurrency=None):
    return plan_workers(WORKER_GROUPS, processes, cores, concurrency, llm_concurrency=24, cpu_concurrency=2)


def test_auto_on_two_cores():
    p = plan("auto", 2)
    assert {name: g.processes for name, g in p.items()} == {"ingest": 2, "merge": 1, "cluster": 1, "query": 1,
                                                            "map": 1}
    assert p["merge"] == p["cluster"] == GroupPlan(1, 2)  # prefork: a child per core
    assert p["ingest"] == GroupPlan(2, 24)  # GIL-bound extraction: a threads process per core
    assert p["query"] == p["map"] == GroupPlan(1, 24)  # threads: llm_concurrency


def test_auto_grows_with_cores():
    p = plan("auto", 16)
    assert p["ingest"] == GroupPlan(16, 24)
    assert p["query"] == p["map"] == GroupPlan(4, 24)  # LLM-bound: one per four cores, many threads
    assert p["merge"] == p["cluster"] == GroupPlan(1, 16)
    assert plan("auto", 64)["merge"].concurrency == MAX_AUTO_CHILDREN
    assert plan("auto", 0)["ingest"] == GroupPlan(1, 24)  # never fewer than one
    assert plan("auto", 8, concurrency=64)["ingest"] == GroupPlan(8, 64)  # --concurrency: threads per process


def test_a_fixed_count_starts_that_many_of_every_group():
    p = plan(3, 16, concurrency=16)
    assert all(g.processes == 3 for g in p.values())
    assert p["ingest"] == GroupPlan(3, 16)
    assert p["merge"] == GroupPlan(3, 2)  # prefork: min(concurrency or cpu_concurrency, cpu_concurrency)
    assert plan(1, 16)["cluster"] == GroupPlan(1, 2)  # no --concurrency: cpu_concurrency children
    assert plan(1, 16, concurrency=1)["merge"] == GroupPlan(1, 1)  # --concurrency 1: one
    solo = plan_workers([("x", ["q"], "solo")], "auto", 8, None, 24, 2)
    assert solo == {"x": GroupPlan(1, 1)}


@pytest.mark.parametrize("raw,expected", [("auto", "auto"), (None, "auto"), (" AUTO ", "auto"), ("4", 4), (2, 2)])
def test_parse_processes(raw, expected):
    assert parse_processes(raw) == expected


@pytest.mark.parametrize("raw", ["0", "-1", "many", "1.5"])
def test_parse_processes_refuses(raw):
    with pytest.raises(ValueError):
        parse_processes(raw)


def test_available_cores_is_positive():
    assert available_cores() >= 1


def test_up_flag():
    from graphfleet_cli.main import build_parser

    args = build_parser().parse_args(["up", "--processes", "2"])
    assert args.processes == "2"
    assert build_parser().parse_args(["up"]).processes is None  # then workers.processes (default "auto")
    assert isinstance(args, argparse.Namespace)
