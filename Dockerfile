# One image for every streamcrawl service: the command picks the role
# (`python -m frontier|fetcher|parser|linkgraph|storage`, or `streamcrawl topics create`).
# Build from the repository root: docker build -t streamcrawl:0.1.0 .
# deploy/README.md says how compose and Kubernetes run it.

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streamcrawl ./streamcrawl
COPY frontier ./frontier
COPY fetcher ./fetcher
COPY parser ./parser
COPY linkgraph ./linkgraph
COPY storage ./storage
# Wheels of the package and every dependency; the runtime stage installs them without a compiler.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STREAMCRAWL_HTTP__PORT=9400 \
    STREAMCRAWL_FRONTIER__API_PORT=8080 \
    STREAMCRAWL_LINKGRAPH__API_PORT=8080 \
    STREAMCRAWL_STORAGE__API_PORT=8080 \
    STREAMCRAWL_STATE__DIRECTORY=/var/lib/streamcrawl/state \
    STREAMCRAWL_STORAGE__ROOT=/var/lib/streamcrawl/storage
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --gid 0 --home-dir /var/lib/streamcrawl --no-create-home streamcrawl \
    && mkdir -p /var/lib/streamcrawl/state /var/lib/streamcrawl/storage \
    && chown -R 10001:0 /var/lib/streamcrawl \
    && chmod -R g=u /var/lib/streamcrawl
COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/streamcrawl-entrypoint
USER 10001
WORKDIR /var/lib/streamcrawl
# 9400: /metrics, /healthz, /readyz. 8080: the role's API (frontier crawl control, graph, pages).
EXPOSE 9400 8080
VOLUME ["/var/lib/streamcrawl/state"]
ENTRYPOINT ["/usr/local/bin/streamcrawl-entrypoint"]
CMD ["streamcrawl", "--help"]
