# graphfleet worker image: the full package (Celery workers, clustering with igraph + leidenalg,
# Weaviate client, LLM client). One image for every worker type; the queue is chosen by the command.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY workers ./workers
COPY api_gateway ./api_gateway
COPY llm_simulator ./llm_simulator
COPY graphfleet_cli ./graphfleet_cli
RUN python -m venv /opt/venv && /opt/venv/bin/pip install . \
 && /opt/venv/bin/python -c "import igraph, leidenalg, weaviate, workers.celery_app"

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PROMETHEUS_MULTIPROC_DIR=/run/graphfleet-metrics
RUN useradd --create-home --uid 10001 graphfleet && install -d -o graphfleet /run/graphfleet-metrics
COPY --from=build /opt/venv /opt/venv
USER graphfleet
WORKDIR /home/graphfleet
EXPOSE 9808
# Overridden per service in docker-compose.yml (-Q <queue> -c <concurrency>).
CMD ["celery", "-A", "workers.celery_app", "worker", "-P", "threads", "-c", "8", "--without-gossip", "--without-mingle"]
