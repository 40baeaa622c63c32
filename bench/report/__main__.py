"""``python -m bench.report``: rewrite docs/benchmarks.md from bench/results."""

from bench.report.render import main

main()
