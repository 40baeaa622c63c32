"""bench/suites/global_cost.py's coverage arithmetic (the figures docs/benchmarks.md reports for issue 21)."""

from bench.suites.global_cost import coverage, point_reports


def test_point_reports_split_multi_report_citations_and_keep_the_best_positive_score():
    pts = [["L0-1,L0-2", 40], ["L0-1", 80], ["L0-3", 0], ["", 50]]
    assert point_reports(pts) == {"L0-1": 80.0, "L0-2": 40.0}
    assert point_reports(None) == {}


def test_coverage_is_the_share_of_the_full_scans_reports_found():
    full = {"a": 90.0, "b": 10.0, "c": 100.0}
    assert coverage(full, {"a": 1.0, "c": 5.0, "z": 50.0}) == 2 / 3
    assert coverage(full, {}) == 0.0
    assert coverage({}, {"a": 1.0}) == 1.0  # the full scan found nothing: nothing to miss
