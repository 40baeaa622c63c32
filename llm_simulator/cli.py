"""``graphfleet llm-simulator`` / ``python -m llm_simulator``: serve the simulator."""

from __future__ import annotations

import argparse

from .config import EMBEDDINGS, LOCAL_DIM, SimConfig


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = SimConfig()
    parser.add_argument("--port", type=int, default=d.port, help=f"port to listen on (default {d.port})")
    parser.add_argument("--host", default=d.host, help=f"address to bind (default {d.host})")
    parser.add_argument("--latency-ms", type=float, default=d.latency_ms, help="added latency per request")
    parser.add_argument("--ms-per-completion-token", type=float, default=d.ms_per_completion_token,
                        help="added latency per completion token of a chat answer, on top of --latency-ms "
                             "(12.5: a model generating 80 tokens/s; default 0)")
    parser.add_argument("--error-rate", type=float, default=d.error_rate, help="share of requests answered 5xx")
    parser.add_argument("--rate-limit-tpm", type=int, default=None, help="tokens per minute per model (0/none: off)")
    parser.add_argument("--rate-limit-rpm", type=int, default=None, help="requests per minute per model")
    parser.add_argument("--malformed-rate", type=float, default=d.malformed_rate,
                        help="share of extraction/JSON answers that are malformed")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of the deterministic fault injection")
    parser.add_argument("--embeddings", choices=EMBEDDINGS, default=d.embeddings,
                        help="embedding vectors: 'local', wordllama's 256-dimension model, which knows meaning "
                             "(default), or 'hashing', hashed bags of words, which only see shared words")
    parser.add_argument("--embedding-dim", type=int, default=d.embedding_dim,
                        help=f"embedding dimension when a request sets no 'dimensions' (default {d.embedding_dim}; "
                             f"at most {LOCAL_DIM} with --embeddings local)")
    parser.add_argument("--log-level", default=d.log_level, help="uvicorn log level")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    d = SimConfig()
    return SimConfig(
        port=getattr(args, "port", d.port),
        host=getattr(args, "host", d.host),
        latency_ms=getattr(args, "latency_ms", d.latency_ms),
        ms_per_completion_token=getattr(args, "ms_per_completion_token", d.ms_per_completion_token),
        error_rate=getattr(args, "error_rate", d.error_rate),
        rate_limit_tpm=getattr(args, "rate_limit_tpm", None),
        rate_limit_rpm=getattr(args, "rate_limit_rpm", None),
        malformed_rate=getattr(args, "malformed_rate", d.malformed_rate),
        seed=getattr(args, "seed", d.seed),
        embeddings=getattr(args, "embeddings", d.embeddings),
        embedding_dim=getattr(args, "embedding_dim", d.embedding_dim),
        log_level=getattr(args, "log_level", d.log_level),
    )


def main(args: argparse.Namespace | None = None) -> int:
    if args is None:
        args = add_arguments(argparse.ArgumentParser(prog="llm-simulator")).parse_args()
    from .server import run

    run(config_from_args(args))
    return 0
