"""celery_patches/soft_shutdown.py: the acks Celery leaves on its event loop during the soft shutdown are run.

Real kombu objects: an event loop (``Hub``), messages delivered on kombu's in-memory transport, and the ack
callbacks built by Celery's own ``Consumer.call_soon_ack`` (what a task thread schedules when it finishes),
so a change of that shape in a Celery or kombu upgrade fails here.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from types import SimpleNamespace

import pytest
from amqp.method_framing import frame_writer
from amqp.transport import TCPTransport
from celery.concurrency import get_implementation
from celery.worker import state
from celery.worker.consumer.consumer import Consumer as CeleryConsumer
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.asynchronous import Hub

from shared.infra.messaging.celery_patches import main_stack, shutdown_acks, shutdown_pool, soft_shutdown
from shared.infra.messaging.celery_patches.soft_shutdown import cannot_stop_tasks
from shared.infra.redis.conn import connect


def _delivered(conn: Connection, n: int) -> list:
    queue = conn.SimpleQueue("soft-shutdown-test")
    for i in range(n):
        queue.put({"i": i})
    return [queue.get(timeout=1) for _ in range(n)]


def _schedule(hub: Hub, callback, *args) -> None:
    """As a finished task's thread does: Celery's call_soon_ack puts the callback on the hub."""
    shutdown_acks.install()  # what a worker does on worker_init (celery_patches.on_worker_init)
    CeleryConsumer.call_soon_ack(SimpleNamespace(hub=hub), callback, logging.getLogger("test"), (), *args)


def _run_loop_once(hub: Hub) -> None:
    """What the event loop does with the callbacks it takes (``Hub.create_loop``; ``Hub.close`` too)."""
    for item in hub._pop_ready():
        item()


def test_acks_and_rejects_waiting_on_the_loop_are_run_once_and_nothing_else():
    hub, other_ran = Hub(), []
    with Connection("memory://") as conn:
        acked, rejected, untouched = _delivered(conn, 3)
        thread = threading.Thread(target=lambda: (_schedule(hub, acked.ack_log_error),
                                                  _schedule(hub, rejected.reject_log_error, True)))
        thread.start()
        thread.join()
        hub.call_soon(lambda: other_ran.append(1))  # not an ack: left to the loop
        assert shutdown_acks.flush_acks() == 2
        assert acked.acknowledged and acked._state == "ACK"
        assert rejected.acknowledged and rejected._state == "REJECTED"  # with requeue=True: back on its queue
        assert conn.SimpleQueue("soft-shutdown-test").get(timeout=1).payload == rejected.payload
        assert not untouched.acknowledged and not other_ran
        assert shutdown_acks.flush_acks() == 0
        _run_loop_once(hub)  # a loop (or the hub's close) that runs them after the flush: the other callback only
        assert other_ran == [1] and acked._state == "ACK" and rejected._state == "REJECTED"


def test_the_acks_the_interrupted_loop_had_taken_or_held_locked_are_run_too():
    """The signal can come while the loop holds the ready set's lock, or after it took the set (``_pop_ready``) and
    before it ran what was in it: both used to leave those acks unrun, and the exit lost them."""
    hub = Hub()
    with Connection("memory://") as conn:
        locked, taken, ran = _delivered(conn, 3)
        _schedule(hub, locked.ack_log_error)
        with hub._ready_lock:  # the signal arrived while the loop held it
            assert shutdown_acks.flush_acks() == 1 and locked.acknowledged
        _schedule(hub, taken.ack_log_error)
        _schedule(hub, ran.ack_log_error)
        batch = list(hub._pop_ready())  # the loop took them: on the hub no more, and not run yet
        [item() for item in batch if item.fun.message is ran]  # the loop ran one of them, then the signal came
        assert hub._ready == set() and ran.acknowledged and not taken.acknowledged
        assert shutdown_acks.flush_acks() == 1 and taken.acknowledged
        for item in batch:  # a loop that went on anyway settles nothing twice (kombu raises MessageStateError)
            item()
        assert shutdown_acks._pending == {}


def test_what_is_not_a_messages_ack_is_scheduled_as_before_and_nothing_is_pending():
    hub, ran = Hub(), []
    _schedule(hub, lambda *args: ran.append(args[2:]), "x")
    assert shutdown_acks.flush_acks() == 0
    _run_loop_once(hub)
    assert ran == [("x",)] and shutdown_acks._pending == {}


def test_a_message_delivered_after_the_wait_is_not_started_and_goes_back_to_its_queue():
    """What Celery's cold shutdown still delivers after the wait (basic_cancel's drain on RabbitMQ, the BRPOP
    in flight on Redis) reaches no task: it stays unacked, so the requeue (or on Redis the channel's close,
    on RabbitMQ the closed connection) puts it back."""
    queue, started = Queue("soft-shutdown-after-wait", Exchange("soft-shutdown-after-wait"), "k"), []
    with Connection("memory://") as conn:
        Producer(conn.channel()).publish({"i": 1}, exchange=queue.exchange, routing_key="k", declare=[queue],
                                         headers={"task": "graphfleet.extract_chunk"})
        channel = conn.channel()
        consumer = Consumer(channel, queues=[queue], on_message=started.append)
        soft_shutdown.start_nothing_more(SimpleNamespace(task_consumer=consumer))
        consumer.consume()
        conn.drain_events(timeout=1)
        assert started == []
        assert soft_shutdown.requeue_held(SimpleNamespace(task_consumer=consumer)) == 1  # delivered, unacked
        back = conn.SimpleQueue(queue).get(timeout=1)
        assert back.payload == {"i": 1} and back.headers["task"] == "graphfleet.extract_chunk"
    soft_shutdown.start_nothing_more(SimpleNamespace())  # a consumer that never connected: nothing to do


def test_a_pool_that_cannot_stop_its_tasks_is_told_from_a_started_prefork_pool():
    """threads and solo have no ``terminate_job``; prefork sets its own on the instance when it starts (the class
    keeps BasePool's, so a check of the class took prefork for a pool that cannot stop its tasks)."""
    assert cannot_stop_tasks(get_implementation("threads")(limit=1))
    assert cannot_stop_tasks(get_implementation("solo")(limit=1))
    prefork = get_implementation("prefork")(limit=1)
    prefork.terminate_job = lambda pid, signal=None: None  # what TaskPool.on_start does (billiard's terminate_job)
    assert not cannot_stop_tasks(prefork)


def _exiting_worker(monkeypatch, consumer, timeout_s: float = 1.0) -> tuple[SimpleNamespace, list, list]:
    """A threads-pool worker whose ``os._exit`` and ``worker_shutdown`` sends are recorded: (worker, exits, hooks)."""
    exits, hooks = [], []
    shutdown_signal = SimpleNamespace(send=lambda sender=None, **_kw: hooks.append(sender))
    monkeypatch.setattr(soft_shutdown, "signals", SimpleNamespace(worker_shutdown=shutdown_signal))
    monkeypatch.setattr(soft_shutdown.os, "_exit", exits.append)
    conf = SimpleNamespace(worker_soft_shutdown_timeout=timeout_s, worker_enable_soft_shutdown_on_idle=False)
    worker = SimpleNamespace(app=SimpleNamespace(conf=conf), consumer=consumer,
                             pool=get_implementation("threads")(limit=1))
    return worker, exits, hooks


def test_a_sigterm_before_the_worker_consumes_exits_cleanly_with_its_shutdown_hooks(monkeypatch):
    """A SIGTERM while a worker starts (a query worker warms its tenants for up to 5 s before consuming): Celery's
    consumer exists but has no task consumer yet, so nothing is held. The handler exits after the wait with the
    ``worker_shutdown`` hooks run, instead of failing on the missing channel."""
    worker, exits, hooks = _exiting_worker(monkeypatch, SimpleNamespace(task_consumer=None, hub=None))
    assert not soft_shutdown.client_holds_unacked(worker.consumer)
    soft_shutdown._wait_then_requeue(worker)
    assert exits == [soft_shutdown.EXIT_CODE]
    assert hooks == [worker]


def test_on_redis_with_nothing_running_the_worker_exits_too_with_what_it_holds_requeued(monkeypatch):
    """On a virtual transport (Redis; kombu's memory one here) with nothing running, the handler exits as on RabbitMQ:
    Celery's cold shutdown after the wait once hung past 120 s in CI. A message the worker held (prefetched, never
    started) is back in its queue, and the ``worker_shutdown`` hooks ran."""
    with Connection("memory://") as conn:
        queue = conn.SimpleQueue("held-at-exit")
        queue.put({"i": 1})
        consumer = Consumer(conn.channel(), queues=[Queue("held-at-exit")], callbacks=[lambda _b, _m: None])
        consumer.consume()
        conn.drain_events(timeout=1)  # delivered, not acked: held by this worker
        worker, exits, hooks = _exiting_worker(monkeypatch, SimpleNamespace(task_consumer=consumer, hub=None))
        assert soft_shutdown.client_holds_unacked(worker.consumer)
        soft_shutdown._wait_then_requeue(worker)
        assert exits == [soft_shutdown.EXIT_CODE] and hooks == [worker]
        assert queue.get(timeout=1).payload == {"i": 1}


class _Request:  # Celery keeps its active requests in a WeakSet
    acknowledged = False


def _task(started: list, name: str, request, *, accept_delay: float = 0.0, run_s: float = 0.0):
    """What Celery hands a threads pool for one request: its accept callback (``task_accepted``: the request becomes
    active), the task, and its callback (``task_ready`` and the ack), as ``apply_target`` calls them."""
    def accept(*_args):
        time.sleep(accept_delay)  # a thread that took the task from the queue and has not started it yet
        state.active_requests.add(request)

    def target():
        started.append(name)
        time.sleep(run_s)

    def done(_result):
        state.active_requests.discard(request)
        request.acknowledged = True

    return {"target": target, "accept_callback": accept, "callback": done}


def test_tasks_queued_for_a_thread_start_no_more_and_the_wait_sees_a_task_about_to_start():
    """RabbitMQ's quorum queues prefetch per queue, so a threads worker holds more messages than threads and the rest
    wait in the pool's queue. In the soft shutdown those start no more (cancelled; their messages go back unacked),
    and a task a thread has taken but not yet started keeps the wait going: the wait used to see no running task
    then, end, and the exit stopped that task just after it started (it ran twice; CI saw it on RabbitMQ)."""
    shutdown_pool.install()
    pool, started = get_implementation("threads")(limit=1), []
    running, queued = _Request(), _Request()
    pool.apply_async(**_task(started, "running", running, run_s=0.3))
    pool.apply_async(**_task(started, "queued", queued))
    time.sleep(0.05)  # the one thread runs the first task; the second waits in the pool's queue
    worker = SimpleNamespace(app=SimpleNamespace(conf=SimpleNamespace(
        worker_soft_shutdown_timeout=10.0, worker_enable_soft_shutdown_on_idle=False)), consumer=None, pool=pool)
    soft_shutdown.soft_shutdown_wait(worker)
    assert running.acknowledged and started == ["running"]
    assert not queued.acknowledged and not shutdown_pool.pool_busy()

    pool, started = get_implementation("threads")(limit=1), []
    taken = _Request()
    pool.apply_async(**_task(started, "taken", taken, accept_delay=0.3))
    worker.pool = pool
    time.sleep(0.05)  # the thread has taken it: it is in no queue and not active yet
    soft_shutdown.soft_shutdown_wait(worker)
    assert taken.acknowledged and started == ["taken"]


def test_the_queued_tasks_are_cancelled_even_when_the_signal_came_while_the_pool_was_handed_one():
    """The handler runs on the main thread, which hands tasks to the pool (``ThreadPoolExecutor.submit`` under the
    executor's lock, then the tracking): cancelling through ``shutdown`` there waited for that lock for ever (a worker
    alive 120 s after SIGTERM, its wait's first line never logged). Cancelling takes no lock."""
    shutdown_pool.install()
    pool, started, release = get_implementation("threads")(limit=1), [], threading.Event()
    pool.apply_async(**_task(started, "running", _Request()))
    pool.apply_async(target=release.wait)  # holds the one thread
    time.sleep(0.05)
    queued = [_Request() for _ in range(3)]
    for i, request in enumerate(queued):
        pool.apply_async(**_task(started, f"queued-{i}", request))
    with pool.executor._shutdown_lock:  # held by the interrupted submit
        assert shutdown_pool.cancel_queued(pool) == 3
    release.set()
    time.sleep(0.1)
    assert started == ["running"] and not shutdown_pool.pool_busy()


def _brpop_answered(redis_url: str, queue: str):
    """A kombu consumer on real Redis whose ``BRPOP`` the server has answered with the one message of ``queue``, the
    answer unread in the socket: what a worker holds in flight when the signal handler blocks its event loop.
    Returns (connection, consumer, messages its callback got)."""
    with Connection(redis_url) as producer_conn:
        producer_conn.SimpleQueue(queue).put({"task": "in flight"})
    conn = Connection(redis_url)
    got: list = []
    consumer = Consumer(conn.channel(), queues=[Queue(queue)], callbacks=[lambda _body, message: got.append(message)])
    consumer.consume()
    channel = consumer.channel
    conn.transport.cycle._register_BRPOP(channel)  # what kombu's poller does before it waits: BRPOP sent
    assert select.select([channel.client.connection._sock], [], [], 5)[0], "Redis did not answer the BRPOP"
    return conn, consumer, got


def _queued(redis_url: str, queue: str) -> int:
    return connect(redis_url).llen(queue)


def test_on_redis_the_message_in_flight_is_read_and_requeued_not_lost_with_the_exit(broker_redis, monkeypatch):
    """Redis pops a message when it answers BRPOP; kombu holds it (its unacked hash, requeued by ``requeue_held``) only
    once it read the answer, and the event loop that reads it is blocked by the signal handler. An exit that left the
    answer unread lost the message until the watchdog re-enqueued its step (~2.5 min in CI). The exit now reads it."""
    conn, consumer, got = _brpop_answered(broker_redis.url, "in-flight-lost")
    consumer.channel.client.connection.disconnect()  # the exit without the read: the socket goes, the message too
    conn.release()
    assert got == [] and _queued(broker_redis.url, "in-flight-lost") == 0

    conn, consumer, got = _brpop_answered(broker_redis.url, "in-flight-kept")
    worker, exits, _hooks = _exiting_worker(monkeypatch, SimpleNamespace(task_consumer=consumer, hub=None))
    soft_shutdown._exit(worker)  # reads the answer, requeues what the worker holds, exits
    assert exits == [soft_shutdown.EXIT_CODE] and len(got) == 1
    consumer.channel.client.connection.disconnect()
    conn.release()
    assert _queued(broker_redis.url, "in-flight-kept") == 1


def test_the_read_in_flight_is_left_alone_when_the_interrupted_thread_is_inside_it():
    """The signal handler runs on top of the interrupted main thread: reading the answer again there would block."""
    def brpop_read():
        return main_stack.main_thread_in(brpop_read)

    assert brpop_read() is True
    assert main_stack.main_thread_in(brpop_read) is False


def _amqp_writer(sendall):
    """py-amqp's own frame writer (one lock for every frame of a connection) over a transport whose socket send is
    ``sendall``: a signal handler runs inside ``sendall``, after the send (CPython checks for signals there)."""
    transport = TCPTransport("127.0.0.1:1")  # never connected
    transport._write = sendall
    return frame_writer(SimpleNamespace(frame_max=131072, bytes_sent=0), transport)


def _listed(fun, message) -> shutdown_acks.Settle:
    settle = shutdown_acks.Settle(fun, message, (message,), {})
    shutdown_acks._pending[id(settle)] = settle
    return settle


@pytest.mark.parametrize("exiting", [True, False])
def test_a_signal_while_the_loop_writes_an_ack_frame_leaves_nothing_blocked_and_sends_nothing_twice(exiting):
    """py-amqp writes every frame of a connection under one lock; a signal that came while the loop wrote an ack left
    the handler's acks waiting for that lock (a RabbitMQ SIGTERM run: "the signal came in amqp/transport.py:350
    write", a finished task ran twice). An exit releases the lock for its acks and does not send the interrupted ack
    again; a prefork worker, whose loop goes on after the handler, leaves its acks to the loop."""
    frames, seen = [], []

    def sendall(data):
        frames.append(bytes(data))
        if not seen:  # the signal comes in the first send
            seen.append(shutdown_acks.interrupted_write())
            seen.append(shutdown_acks.flush_acks(exiting))
            if exiting:
                seen[0].write_lock.acquire()  # released for the acks; taken back so that this test's thread goes on

    def ack(message):  # an ack on RabbitMQ: its frame through the connection's writer, then the message's state
        writer(1, 1, (60, 80), bytes(9), None)  # basic.ack: delivery tag, multiple
        message.ack()

    writer = _amqp_writer(sendall)
    with Connection("memory://") as conn:
        writing, finished = _delivered(conn, 2)
        interrupted, other = _listed(ack, writing), _listed(ack, finished)
        interrupted()  # the loop runs an ack; the signal comes while its frame is handed to the socket
        main, flushed = seen
        assert main.settle is interrupted and main.sent and main.write_lock is not None
        assert flushed == (1 if exiting else 0) and finished.acknowledged == exiting
        other()  # the loop, when it goes on: what the handler ran is not sent again
        assert len(frames) == 2 and writing.acknowledged and finished.acknowledged
        assert shutdown_acks._pending == {}


def test_an_exit_sends_the_ack_the_interrupted_loop_had_not_yet_written():
    """The signal came inside an ack before its frame went to the socket: the exit sends it (once)."""
    frames, signals, flushed = [], [], []

    def ack(message):
        if not signals:  # the signal comes here; the exit's code never goes on past it
            signals.append(1)
            flushed.append(shutdown_acks.flush_acks(exiting=True))
            return
        writer(1, 1, (60, 80), bytes(9), None)
        message.ack()

    writer = _amqp_writer(lambda data: frames.append(bytes(data)))
    with Connection("memory://") as conn:
        (message,) = _delivered(conn, 1)
        settle = _listed(ack, message)
        settle()
        assert flushed == [1] and len(frames) == 1 and message.acknowledged
        settle()  # claimed: nothing more
        assert len(frames) == 1 and shutdown_acks._pending == {}

