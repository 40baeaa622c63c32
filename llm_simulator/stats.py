"""Counters served at ``GET /stats``; only successful responses count calls and tokens."""

from __future__ import annotations

import copy
import threading

from .responders import TYPES

ERROR_KINDS = ("5xx", "429", "malformed")


def _chat_counts() -> dict[str, int]:
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._data = {
                "chat": {**_chat_counts(), "by_type": {t: _chat_counts() for t in TYPES}},
                "embeddings": {"calls": 0, "inputs": 0, "tokens": 0},
                "errors": {k: 0 for k in ERROR_KINDS},
                "malformed_by_type": {},  # prompt type -> answers broken on purpose
            }

    def chat(self, kind: str, prompt_tokens: int, completion_tokens: int, malformed: bool) -> None:
        with self._lock:
            chat = self._data["chat"]
            for bucket in (chat, chat["by_type"].setdefault(kind, _chat_counts())):
                bucket["calls"] += 1
                bucket["prompt_tokens"] += prompt_tokens
                bucket["completion_tokens"] += completion_tokens
            if malformed:
                self._data["errors"]["malformed"] += 1
                by_type = self._data["malformed_by_type"]
                by_type[kind] = by_type.get(kind, 0) + 1

    def embeddings(self, inputs: int, tokens: int) -> None:
        with self._lock:
            emb = self._data["embeddings"]
            emb["calls"] += 1
            emb["inputs"] += inputs
            emb["tokens"] += tokens

    def error(self, kind: str) -> None:
        with self._lock:
            self._data["errors"][kind] = self._data["errors"].get(kind, 0) + 1

    def snapshot(self) -> dict:
        with self._lock:
            return copy.deepcopy(self._data)
