"""prometheus-client multiprocess mode without undercounting and without leaking files.

Every process writes its samples to ``<dir>/<type>_<pid>.db``. prometheus-client keeps the files of
dead processes forever (counters must stay monotonic), so a fleet that recycles worker processes
(prefork ``max_tasks_per_child``, restarts, autoscaling) grows one file per process ever started.
Here a dead process's counter and histogram files are *folded* into ``counter_archive.db`` /
``histogram_archive.db`` (values added key by key) and deleted; its live-gauge files are deleted
(``mark_process_dead``). Folding happens when a process exits (``atexit`` / Celery's
``worker_process_shutdown``) and, for processes that died without running handlers (SIGKILL, OOM), at
scrape time for every file whose pid is no longer alive. Scrapes read under a shared ``flock`` and
folding holds it exclusively, so a scrape never sees a value both in the archive and in its source file.

The directory must belong to one PID namespace (one host or container): pids are its file names.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import logging
import os
from pathlib import Path

from prometheus_client import multiprocess
from prometheus_client.mmap_dict import MmapedDict

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
ARCHIVE = "archive"
LOCK_FILE = ".graphfleet-metrics.lock"
FOLDED_TYPES = ("counter", "histogram", "summary")


def multiproc_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower()) or None


def prepare_multiproc_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` and remove stale ``*.db`` sample files (call before any metrics process starts)."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    for f in p.glob("*.db"):
        f.unlink(missing_ok=True)
    return p


@contextlib.contextmanager
def dir_lock(path: str, exclusive: bool):
    with open(os.path.join(path, LOCK_FILE), "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fold_file(src: str, dst: str) -> None:
    archive = MmapedDict(dst)
    try:
        for key, value, timestamp, _pos in MmapedDict.read_all_values_from_file(src):
            current, _ts = archive.read_value(key)
            archive.write_value(key, current + value, timestamp)
    finally:
        archive.close()


def fold_process(pid: int | str, path: str | None = None) -> bool:
    """Fold the files of process ``pid`` (which must have stopped writing) into the archive files."""
    path = path or multiproc_dir()
    if not path or not os.path.isdir(path):
        return False
    with dir_lock(path, exclusive=True):
        return _fold_locked(str(pid), path)


def _fold_locked(pid: str, path: str) -> bool:
    folded = False
    for typ in FOLDED_TYPES:
        src = os.path.join(path, f"{typ}_{pid}.db")
        if not os.path.exists(src):
            continue
        if os.path.getsize(src) == 0:  # killed between creating its file and sizing it: it recorded nothing (and
            os.unlink(src)  # prometheus_client cannot read an empty file: a scrape or a stack's stop would fail)
            continue
        try:
            _fold_file(src, os.path.join(path, f"{typ}_{ARCHIVE}.db"))
        except (OSError, ValueError) as exc:  # unreadable file: keep it, it is still counted by scrapes
            log.warning("could not fold %s: %s", src, exc)
            continue
        os.unlink(src)
        folded = True
    multiprocess.mark_process_dead(int(pid), path)
    return folded


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def file_pids(path: str) -> set[int]:
    """Pids that own sample files in ``path`` (the archive excluded)."""
    pids = set()
    for f in glob.glob(os.path.join(path, "*.db")):
        tail = os.path.basename(f)[:-3].rsplit("_", 1)[-1]
        if tail.isdigit():
            pids.add(int(tail))
    return pids


def fold_dead(path: str | None = None) -> list[int]:
    """Fold every process of ``path`` that is no longer alive; returns their pids."""
    path = path or multiproc_dir()
    if not path or not os.path.isdir(path):
        return []
    dead = sorted(p for p in file_pids(path) if p != os.getpid() and not _pid_alive(p))
    if dead:
        with dir_lock(path, exclusive=True):
            for pid in dead:
                _fold_locked(str(pid), path)
    return dead


class FoldingCollector:
    """``MultiProcessCollector`` that first folds dead processes and reads under the shared lock."""

    def __init__(self, path: str):
        self.path = path
        self._inner = multiprocess.MultiProcessCollector(None, path=path)

    def collect(self):
        try:
            fold_dead(self.path)
        except OSError as exc:
            log.warning("folding dead metric files failed: %s", exc)
        with dir_lock(self.path, exclusive=False):
            families = list(self._inner.collect())
        yield from families
