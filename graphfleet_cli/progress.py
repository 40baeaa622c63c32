"""A one-line ingestion progress bar on stderr: documents and chunks done, LLM calls and tokens spent."""

from __future__ import annotations

import shutil
import sys

BAR_WIDTH = 24


def progress_text(view: dict, width: int = BAR_WIDTH) -> str:
    p, u = view.get("progress") or {}, view.get("usage") or {}
    total, done, failed = p.get("chunks_total", 0), p.get("chunks_done", 0), p.get("chunks_failed", 0)
    share = (done + failed) / total if total else 0.0
    filled = int(round(share * width))
    docs = p.get("documents", 0)
    docs_done = p.get("documents_chunked", docs if total else 0)
    tokens = u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
    waiting = view.get("waiting")
    if waiting:  # the LLM endpoint is unreachable: the job waits for it (``Settings.llm.outage_wait_s``)
        return (f"[{'#' * filled}{'.' * (width - filled)}] {share:4.0%} {waiting['message']}: "
                f"{waiting.get('last_error') or ''}"[:200])
    return (f"[{'#' * filled}{'.' * (width - filled)}] {share:4.0%} {view.get('status', '?')}:{p.get('stage') or '-'}"
            f" | docs {docs_done}/{docs} chunks {done}/{total} failed {failed}"
            f" | llm calls {u.get('calls', 0)} tokens {tokens:,}")


class ProgressLine:
    """Redraws one stderr line in place (only meant for a TTY)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.width = shutil.get_terminal_size((120, 20)).columns - 1
        self.shown = False

    def update(self, view: dict) -> None:
        line = progress_text(view)[: self.width]
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
