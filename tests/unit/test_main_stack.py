"""``celery_patches.main_stack.main_frames`` (what a worker's SIGTERM handler reads) never lets a garbage collection
start inside ``sys._current_frames()``. On CPython 3.11 that call holds the runtime's thread-list lock while it
allocates; a collection started there that frees a ``threading.local`` takes the lock again and the process hangs
for good (python/cpython#106883; it hung the unit suite once, in ``test_soft_shutdown``). Reproduced alone:
thread-locals in reference cycles, ``gc.set_threshold(1, 1, 1)``, then ``sys._current_frames()`` as the first
allocation: the process never returns. Which allocation starts a collection cannot be arranged from a test through
the function, so these tests check the two ways it avoids the call under a live collector."""

from __future__ import annotations

import gc
import sys
import threading

from shared.infra.messaging.celery_patches import main_stack


def _record_calls(monkeypatch) -> list[bool]:
    """Each ``sys._current_frames()`` call from ``main_stack``: whether the collector was enabled during it."""
    calls, real = [], sys._current_frames

    def current_frames():
        calls.append(gc.isenabled())
        return real()

    monkeypatch.setattr(main_stack.sys, "_current_frames", current_frames)
    return calls


def test_on_the_main_thread_the_stack_is_read_without_the_thread_list(monkeypatch):
    calls = _record_calls(monkeypatch)

    def caller():
        return main_stack.main_frames()

    frames = caller()
    assert calls == []
    assert frames[0].f_code is caller.__code__
    assert frames[1].f_code is test_on_the_main_thread_the_stack_is_read_without_the_thread_list.__code__


def test_from_another_thread_the_collector_is_paused_during_the_read(monkeypatch):
    calls, out = _record_calls(monkeypatch), []
    assert gc.isenabled()
    reader = threading.Thread(target=lambda: out.append(main_stack.main_frames()))
    reader.start()
    reader.join()
    assert calls == [False] and gc.isenabled()  # paused during the call, enabled again after it
    assert any(f.f_code is test_from_another_thread_the_collector_is_paused_during_the_read.__code__ for f in out[0])


def test_a_disabled_collector_stays_disabled(monkeypatch):
    calls, out = _record_calls(monkeypatch), []
    gc.disable()
    try:
        reader = threading.Thread(target=lambda: out.append(main_stack.main_frames()))
        reader.start()
        reader.join()
        assert calls == [False] and not gc.isenabled()
    finally:
        gc.enable()
