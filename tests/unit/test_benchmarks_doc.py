"""docs/benchmarks.md is what ``python -m bench.report`` renders: a section written into the doc by hand and not
into ``bench/report/notes/*.md`` would be lost the next time the report is made (as three were once)."""

from bench.report.common import ROOT
from bench.report.render import render


def test_the_benchmarks_doc_is_what_the_report_renders():
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    rendered = render()
    missing = [line for line in doc.splitlines() if line.startswith("#") and line not in rendered.splitlines()]
    assert not missing, f"headings in docs/benchmarks.md that the report does not render: {missing}"
    assert rendered == doc, "docs/benchmarks.md differs from `.venv/bin/python -m bench.report`'s output"
