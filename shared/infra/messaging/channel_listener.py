"""One Redis subscription per asyncio client for everything a gateway process listens to: the end message of
each job held with ``?wait`` and the events of each query followed as Server-Sent Events.

Before, each held request and each stream opened a pubsub connection of its own from the client's pool, so a
gateway holding N of them held N Redis connections, and once they and their status reads filled the pool the
next request failed with a 500. Here one reader task per client
owns one pubsub connection: a listener registers its channels (``watch``: SUBSCRIBE for a channel's first
mailbox, UNSUBSCRIBE when its last one leaves) and the reader puts each message in the mailbox of every listener
of its channel, in the order Redis sent them.

A lost connection (a Redis restart, a cluster node gone, ``CLIENT KILL``) is the reader's to mend: it connects
again with a growing pause (``RETRY_S``), subscribes to every channel still listened to, then marks every
mailbox ``LOST``: each listener re-reads what it listens for (a job's status, a query's event log), so nothing
published while nobody listened is missed. Waits keep their own periodic re-reads as the last resort.

Hand-written because redis-py's ``PubSub.run`` dispatches to per-channel handlers but neither reconnects with a
pause nor tells anyone that messages may have been lost in between."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from shared.infra.redis.conn import apubsub, to_str

log = logging.getLogger(__name__)

KEEP_CHANNEL = "graphfleet:listener"  # always subscribed (nothing publishes on it): the connection stays a pubsub
READ_S = 1.0  # the reader's longest block on the socket (redis-py's health check runs between reads)
RETRY_S = (0.05, 2.0)  # first and longest pause before connecting again
LOST = "lost"  # ``Mailbox.get``: messages may have been missed (the subscription was down): re-read


class Mailbox:
    """One listener's messages, ``(channel, data)`` in arrival order; ``LOST`` once after a reconnection."""

    __slots__ = ("_event", "_messages", "_lost")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._messages: deque[tuple[str, str]] = deque()
        self._lost = False

    def put(self, channel: str, data: str) -> None:
        self._messages.append((channel, data))
        self._event.set()

    def mark_lost(self) -> None:
        self._lost = True
        self._event.set()

    async def get(self, timeout: float) -> tuple[str, str] | str | None:
        """The next message, ``LOST`` (ahead of any message) after a reconnection, or None after ``timeout``."""
        if not (self._lost or self._messages) and timeout > 0:
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                pass
        if self._lost:
            self._lost = False
            return self._settle(LOST)
        return self._settle(self._messages.popleft() if self._messages else None)

    def _settle(self, item):
        if not (self._lost or self._messages):
            self._event.clear()
        return item


class ChannelListener:
    """The subscription shared by every listener on one asyncio Redis client (``of``)."""

    _by_client: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, client) -> None:
        self.client = client
        self.connects = 0  # successful (re)connections, for tests and logs
        self._boxes: dict[str, set[Mailbox]] = {}
        self._pubsub = None
        self._up = asyncio.Event()
        self._reader: asyncio.Task | None = None
        self._stale = False  # a SUBSCRIBE failed: the reader connects again and subscribes to everything

    @classmethod
    def of(cls, client) -> ChannelListener:
        """The listener of ``client`` (an asyncio client is bound to one event loop, so is its listener)."""
        listener = cls._by_client.get(client)
        if listener is None:
            listener = cls._by_client[client] = cls(client)
        return listener

    @classmethod
    async def close_for(cls, client) -> None:
        listener = cls._by_client.pop(client, None)
        if listener is not None:
            await listener.aclose()

    @property
    def channels(self) -> int:
        """Channels listened to now."""
        return len(self._boxes)

    async def start(self, timeout: float = 1.0) -> bool:
        """Start the reader if it is not running; whether it is subscribed within ``timeout`` seconds."""
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._run(), name="graphfleet-channel-listener")
        if self._up.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._up.wait()
        except TimeoutError:
            return False
        return True

    @asynccontextmanager
    async def watch(self, *channels: str, connect_s: float = 1.0) -> AsyncIterator[Mailbox]:
        """A mailbox for ``channels``' messages, subscribed on return when Redis answers within ``connect_s``
        (else the reader subscribes once it connects, and marks the mailbox ``LOST``); released on exit."""
        box, new = Mailbox(), []
        for channel in channels:
            group = self._boxes.setdefault(channel, set())
            if not group:
                new.append(channel)
            group.add(box)
        try:
            if self._pubsub is None:  # set only while the reader runs subscribed
                await self.start(connect_s)  # the reader subscribes to every channel listened to when it connects
            elif new:
                await self._send("subscribe", new)
            yield box
        finally:
            gone = []
            for channel in channels:
                group = self._boxes.get(channel)
                if group is not None:
                    group.discard(box)
                    if not group:
                        del self._boxes[channel]
                        gone.append(channel)
            if gone:
                await self._send("unsubscribe", gone)

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
            try:
                await reader
            except asyncio.CancelledError:
                pass

    async def _send(self, command: str, channels: list[str]) -> None:
        pubsub = self._pubsub
        if pubsub is None:
            return  # not connected: the reader subscribes to what is listened to when it is
        try:
            await getattr(pubsub, command)(*channels)
        except (RedisError, OSError, RuntimeError, AttributeError):
            # RuntimeError: the connection was lost and redis-py reconnects it inside the command, reading the
            # handshake while the reader task reads the same socket ("read() called while another coroutine is
            # already waiting"). AttributeError: the reader task disconnected it while this command was being sent
            # (redis-py then writes to a writer it has just dropped: "'NoneType' object has no attribute
            # 'writelines'"). Either way the connection is the reader's to mend; a channel not subscribed
            # would go unheard until then, so a failed SUBSCRIBE makes the reader start over at once.
            log.debug("%s %s failed: the reader reconnects", command, channels, exc_info=True)
            if command == "subscribe":
                self._stale = True

    async def _run(self) -> None:
        pause = RETRY_S[0]
        while True:
            pubsub = None
            try:
                await self.client.ping()  # a cluster client learns its nodes: the pubsub picks one it knows
                pubsub = apubsub(self.client, ignore_subscribe_messages=True)
                await pubsub.subscribe(KEEP_CHANNEL)
                self._pubsub = pubsub
                if self._boxes:
                    await pubsub.subscribe(*self._boxes)
                self.connects += 1
                self._up.set()
                pause = RETRY_S[0]
                self._mark_lost()  # published while nobody listened: every listener re-reads
                while not self._stale:
                    self._dispatch(await pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_S))
                self._stale = False
                raise RedisConnectionError("a SUBSCRIBE failed")
            except (RedisError, OSError) as exc:
                log.info("channel listener lost its subscription (%s): connecting again in %.2f s", exc, pause)
            except Exception:  # noqa: BLE001 - never leave the listeners without a reader
                log.warning("channel listener failed: connecting again in %.2f s", pause, exc_info=True)
            finally:
                self._up.clear()
                if pubsub is not None:
                    if self._pubsub is pubsub:
                        self._pubsub = None
                    await _aclose(pubsub)
            await asyncio.sleep(pause)
            pause = min(2 * pause, RETRY_S[1])

    def _dispatch(self, message) -> None:
        if message is None or message.get("type") != "message":
            return
        channel = to_str(message["channel"])
        data = to_str(message["data"])
        for box in self._boxes.get(channel, ()):
            box.put(channel, data)

    def _mark_lost(self) -> None:
        for box in {box for group in self._boxes.values() for box in group}:
            box.mark_lost()


async def _aclose(pubsub) -> None:
    """Close ``pubsub`` quietly: it may be the connection that failed."""
    try:
        await pubsub.aclose()
    except Exception:  # noqa: BLE001
        pass
