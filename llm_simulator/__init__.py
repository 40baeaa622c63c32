"""A deterministic OpenAI-compatible LLM simulator for graphfleet's tests and benchmarks."""

from .config import SimConfig

__all__ = ["SimConfig", "create_app", "run", "start_in_thread"]


def __getattr__(name: str):
    if name in ("create_app", "run", "start_in_thread"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
