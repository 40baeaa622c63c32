"""Deterministic fault injection and sliding-window rate limits."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass

from .textutil import unit

WINDOW_S = 60.0
SERVER_ERRORS = (500, 502, 503)


def body_digest(body: dict) -> str:
    raw = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()


class FaultPlan:
    """Faults decided by hashing (seed, request body, attempt number of that body).

    The n-th arrival of an identical body always gets the same decision, so runs are reproducible,
    while a retry is a new attempt and may succeed.
    """

    def __init__(self, seed: int, error_rate: float, malformed_rate: float):
        self.seed = seed
        self.error_rate = error_rate
        self.malformed_rate = malformed_rate
        self._attempts: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def attempt(self, digest: str) -> int:
        with self._lock:
            n = self._attempts[digest]
            self._attempts[digest] = n + 1
            return n

    def reset(self) -> None:
        with self._lock:
            self._attempts.clear()

    def server_error(self, digest: str, attempt: int) -> int | None:
        """An HTTP status (500/502/503) to answer with, or None."""
        if self.error_rate <= 0 or unit(self.seed, "5xx", digest, attempt) >= self.error_rate:
            return None
        return SERVER_ERRORS[int(unit(self.seed, "5xx-code", digest, attempt) * len(SERVER_ERRORS))]

    def malformed(self, digest: str, attempt: int) -> bool:
        return self.malformed_rate > 0 and unit(self.seed, "malformed", digest, attempt) < self.malformed_rate


@dataclass
class Verdict:
    allowed: bool
    retry_after_s: float = 0.0
    kind: str = ""  # "tokens" or "requests"
    limit: int = 0
    remaining: int = 0


class RateLimiter:
    """Per-model sliding 60 s windows over requests and tokens.

    A request larger than the whole token budget is admitted when the window is empty, so that it
    is never refused forever.
    """

    def __init__(self, tpm: int | None, rpm: int | None, clock=time.monotonic):
        self.tpm = tpm or 0
        self.rpm = rpm or 0
        self.clock = clock
        self._windows: dict[str, deque[tuple[float, int]]] = defaultdict(deque)
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._windows.clear()

    def check(self, model: str, tokens: int) -> Verdict:
        """Admit (and record) a request of ``tokens`` tokens, or say how long until it would fit."""
        if not self.tpm and not self.rpm:
            return Verdict(True)
        with self._lock:
            now = self.clock()
            window = self._windows[model]
            while window and window[0][0] <= now - WINDOW_S:
                window.popleft()
            if self.rpm and len(window) >= self.rpm:
                wait = window[len(window) - self.rpm][0] + WINDOW_S - now
                return Verdict(False, wait, "requests", self.rpm, 0)
            used = sum(n for _, n in window)
            if self.tpm and window and used + tokens > self.tpm:
                return Verdict(False, self._token_wait(window, used, tokens, now), "tokens", self.tpm,
                               max(0, self.tpm - used))
            window.append((now, tokens))
            remaining = max(0, self.tpm - used - tokens) if self.tpm else 0
            return Verdict(True, 0.0, "", self.tpm, remaining)

    def _token_wait(self, window: deque[tuple[float, int]], used: int, tokens: int, now: float) -> float:
        freed = 0
        for ts, n in window:
            freed += n
            if used - freed + tokens <= self.tpm or freed == used:
                return ts + WINDOW_S - now
        return WINDOW_S


def retry_headers(wait_s: float) -> dict[str, str]:
    wait_s = max(wait_s, 0.001)
    return {"Retry-After": str(max(1, math.ceil(wait_s))), "retry-after-ms": str(max(1, math.ceil(wait_s * 1000)))}
