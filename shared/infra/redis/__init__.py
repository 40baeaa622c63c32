"""The state Redis: connections (``redis://``, ``rediss://``, cluster; the embedded redis-server of
``graphfleet up``), the key layout, and its one-time migration."""
