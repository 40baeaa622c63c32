"""Folding a dead process's metric files (``metrics_multiproc``): what it recorded is kept in the archive, and a file
it created but never sized (a process killed at that instant: seen when a task's hard time limit killed a worker)
is dropped instead of failing the stack's stop and every scrape."""

from __future__ import annotations

import os
import subprocess
import sys

from prometheus_client.mmap_dict import MmapedDict

from shared.infra.observability.metrics_multiproc import ARCHIVE, fold_dead


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_process_is_folded_and_its_empty_file_dropped(tmp_path):
    counted, empty = _dead_pid(), _dead_pid()
    samples = MmapedDict(str(tmp_path / f"counter_{counted}.db"))
    samples.write_value("graphfleet_test_total", 3.0, 0.0)
    samples.close()
    (tmp_path / f"histogram_{empty}.db").write_bytes(b"")
    assert sorted(fold_dead(str(tmp_path))) == sorted([counted, empty])
    assert not (tmp_path / f"histogram_{empty}.db").exists() and not (tmp_path / f"counter_{counted}.db").exists()
    archive = [(k, v) for k, v, _ts, _pos in MmapedDict.read_all_values_from_file(
        os.path.join(tmp_path, f"counter_{ARCHIVE}.db"))]
    assert archive == [("graphfleet_test_total", 3.0)]
