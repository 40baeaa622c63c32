"""A kombu connection's default channel, opened afresh after RabbitMQ closed it.

Upstream behaviour: a passive ``queue_declare`` of a queue that does not exist makes RabbitMQ close the channel
(``NOT_FOUND``). py-amqp reopens it only while neither the connection nor the channel is closing
(``Channel._on_close``), and kombu's ``Connection.default_channel`` returns whatever channel it holds, with no public
way to drop it short of closing the whole connection. ``shared.infra.messaging.broker_probe.AmqpProbe`` declares queues
that may not exist yet, so it drops that channel with :func:`drop_default_channel`: the next ``default_channel`` opens a
new one.

Applies to: kombu 5.7, amqp 5.4 (``APPLIES_TO``). Delete when the probe keeps a channel of its own, or kombu offers a
public way to replace its default channel.
"""

from __future__ import annotations

APPLIES_TO = {"kombu": ">=5.7,<5.8", "amqp": ">=5.4,<5.5"}


def drop_default_channel(connection) -> None:
    """The next ``connection.default_channel`` opens a new channel (kombu's private ``_default_channel``)."""
    connection._default_channel = None
