# graphfleet gateway image: HTTP API only. Installs deploy/images/gateway-requirements.txt (not the
# package, whose dependencies include igraph/leidenalg/openai/weaviate) and copies shared/ + api_gateway/;
# workers/ is not in the image. The build fails if the gateway would import worker-only code.
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app \
    PROMETHEUS_MULTIPROC_DIR=/run/graphfleet-metrics
WORKDIR /app
COPY deploy/images/gateway-requirements.txt /tmp/requirements.txt
COPY constraints.txt /tmp/constraints.txt
RUN pip install -r /tmp/requirements.txt -c /tmp/constraints.txt
COPY shared ./shared
COPY api_gateway ./api_gateway
RUN python -c "import importlib.util as u, sys; bad = [m for m in ('igraph', 'leidenalg', 'workers') if u.find_spec(m)]; sys.exit(f'worker-only modules in gateway image: {bad}' if bad else 0)" \
 && python -c "import api_gateway.app" \
 && useradd --create-home --uid 10001 graphfleet && install -d -o graphfleet /run/graphfleet-metrics
USER graphfleet
EXPOSE 8000
# --timeout-keep-alive: longer than a load balancer's idle timeout (60 s is common), docs/deployment.md
CMD ["uvicorn", "api_gateway.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000", \
     "--timeout-keep-alive", "75"]
