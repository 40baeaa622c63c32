"""Run the ``graphfleet`` CLI as a newcomer does (a subprocess, the venv's ``bin`` first on PATH) and the shell
code blocks of the project's Markdown docs."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SAFETY_TIMEOUT_S = 180.0  # a hung start fails instead of blocking; never a pass criterion


def cli_env(data_dir: Path, **extra: str) -> dict:
    """This environment without any GRAPHFLEET_* setting (a fresh machine: no LLM, embedded Redis), the venv
    first on PATH, and its own data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHFLEET_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["GRAPHFLEET_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def bash_blocks(markdown: str, heading: str) -> list[str]:
    """The ```bash blocks of the section that starts at ``heading`` (a whole heading line) and ends at the next
    heading of the same or a higher level."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next((i for i in range(start + 1, len(lines))
                if re.match(rf"^#{{1,{level}}} ", lines[i])), len(lines))
    return re.findall(r"^```bash\n(.*?)^```", "\n".join(lines[start:end]) + "\n", re.S | re.M)


def run_bash(script: str, env: dict, cwd: Path, timeout: float = 600.0) -> subprocess.CompletedProcess:
    """``script`` under ``set -euo pipefail``; curl fails on any HTTP status >= 400 (``--fail-with-body``), so
    every command must succeed as written."""
    prelude = 'set -euo pipefail\nshopt -s inherit_errexit\ncurl() { command curl --fail-with-body "$@" && echo; }\n'
    return subprocess.run(["bash", "-c", prelude + script], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


# Ctrl-C at its default action, as a terminal's foreground job has it, then exec: a test run started as a background
# job of a non-interactive shell ignores SIGINT, and a child would inherit that and never see the tests' Ctrl-C
_AS_FOREGROUND = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.argv[1], sys.argv[1:])")


class UpProcess:
    """``graphfleet up`` in the background, read line by line."""

    def __init__(self, args: list[str], env: dict, cwd: Path = ROOT):
        self.proc = subprocess.Popen([sys.executable, "-c", _AS_FOREGROUND, str(BIN / "graphfleet"), "up", *args],
                                     env=env, cwd=cwd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.lines: list[str] = []
        self._stopped = self._eof = False
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = SAFETY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} from graphfleet up; output: {self.lines}") from None
            if line is None:
                self._eof = True
                raise AssertionError(f"graphfleet up exited ({self.proc.wait()}); output: {self.lines}")
            self.lines.append(line)

    def field(self, name: str) -> str:
        """The value of a ``  name:  value`` line of the startup banner."""
        for line in self.lines:
            if line.strip().startswith(f"{name}:"):
                return line.split(":", 1)[1].strip()
        raise AssertionError(f"no {name!r} line in {self.lines}")

    def stop(self) -> int:
        """SIGTERM, as a service manager would; the exit code (the rest of the output is in ``lines``)."""
        if self._stopped:
            return self.proc.returncode
        self._stopped = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        while not self._eof and (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        self._eof = True
        return code

    def __enter__(self) -> UpProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
