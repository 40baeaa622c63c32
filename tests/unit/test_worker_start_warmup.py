"""What a worker readies before its first task, in a fresh process as it starts: a prefork child's own runtime
(otherwise paid on an ingestion's path)."""

import json
import subprocess
import sys

from tests.unit.test_secure_defaults import worker_env


def test_a_prefork_child_builds_its_own_runtime_before_its_first_task(redis_server):
    """A merge or cluster worker's child builds its runtime (Redis clients, the LLM client and its TLS context) in a
    thread started at ``worker_process_init``, not in its first task, which is on an ingestion's path. A real fork
    of a process whose runtime was built, then Celery's signal in the child."""
    code = (
        "import os, threading\nfrom celery.signals import worker_process_init\nimport workers.celery_app\n"
        "from workers import runtime as r\nparent = r.runtime()\npid = os.fork()\n"
        "if pid == 0:\n"
        "    worker_process_init.send(sender=None)\n"
        "    warm = [t for t in threading.enumerate() if t.name == 'warm-child']\n"
        "    for t in warm:\n        t.join(60)\n"
        "    built = r._runtime is not None and r._runtime is not parent and r._runtime.pid == os.getpid()\n"
        "    os._exit(0 if len(warm) == 1 and built else 3)\n"
        "_, status = os.waitpid(pid, 0)\nprint(os.waitstatus_to_exitcode(status))")
    llm = {"GRAPHFLEET_LLM_BASE_URL": "http://127.0.0.1:9/v1", "GRAPHFLEET_LLM_API_KEY": "sk-test"}
    out = subprocess.run([sys.executable, "-c", code], env=worker_env(redis_server.url, **llm), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0", out.stderr


def test_a_query_worker_touches_its_index_memory_before_consuming(redis_server):
    """With ``GRAPHFLEET_QUERY__PRETOUCH_MB`` a query worker holds that much touched memory once
    ``prepare_query_worker`` returns (every page of the pool resident: the present bit of each page in
    ``/proc/self/pagemap``, which holds whether the kernel merged the pool's mapping with a neighbour or not), and its
    index loads take their buffers from it. On a shared Redis the worker also warms other tests' tenants, whose loads
    may hold part of the pool."""
    code = ("import json, struct\nimport numpy as np\nimport workers.celery_app\nfrom workers.runtime import runtime\n"
            "from shared.infra import pretouched\nfrom shared.infra.store import warmup as q\n"
            "before = pretouched._pool is None\nq.prepare_query_worker(runtime)\n"
            "pool = pretouched._pool\nfree = pool.free_bytes()\nheld = pretouched.buffer(2**20)\n"
            "base = np.frombuffer(pool._map, dtype=np.uint8, count=1).__array_interface__['data'][0]\n"
            "at = held.__array_interface__['data'][0]\n"
            "with open('/proc/self/pagemap', 'rb') as f:\n"
            "    f.seek(base // pretouched.PAGE * 8)\n"
            "    raw = f.read(pool.size // pretouched.PAGE * 8)\n"
            "present = sum(e >> 63 for e in struct.unpack(f'{len(raw) // 8}Q', raw))\n"
            "print(json.dumps([before, pool.size, free, pool.free_bytes(), at - base, present * pretouched.PAGE]))")
    env = worker_env(redis_server.url, GRAPHFLEET_QUERY__PRETOUCH_MB="64")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, size, free, after, offset, resident = json.loads(out.stdout.strip().splitlines()[-1])
    assert before and size == 64 * 2**20
    assert after == free - 2**20 and 0 <= offset <= size - 2**20  # the 1 MiB buffer came from the pool
    assert resident == size  # every page resident, not only mapped
