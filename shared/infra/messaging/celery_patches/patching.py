"""How a patch here is applied: once per process, with the original kept on the replacement."""

from __future__ import annotations

from collections.abc import Callable

MARK = "_graphfleet_patch"


def replace(owner: type, name: str, build: Callable) -> None:
    """Set ``owner.name`` to ``build(original)``, once: a second call finds the replacement in place and does
    nothing. The original stays reachable as the replacement's ``__wrapped__`` (for :func:`restore`)."""
    current = owner.__dict__[name]  # the class's own attribute: a patch replaces what this class defines
    if getattr(current, MARK, False):
        return
    patched = build(current)
    setattr(patched, MARK, True)
    patched.__wrapped__ = current
    setattr(owner, name, patched)


def is_patched(owner: type, name: str) -> bool:
    return bool(getattr(owner.__dict__.get(name), MARK, False))


def restore(owner: type, name: str) -> None:
    """Put the original back (tests that compare with and without a patch)."""
    if is_patched(owner, name):
        setattr(owner, name, owner.__dict__[name].__wrapped__)
