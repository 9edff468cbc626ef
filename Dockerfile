# taskcost collector: OTLP/HTTP intake, SQL API and dashboards on one port, DuckDB file under /data.
FROM python:3.11-slim

WORKDIR /app
COPY constraints.txt pyproject.toml README.md ./
COPY sdk ./sdk
COPY taskcost ./taskcost
COPY dashboards ./dashboards
RUN pip install --no-cache-dir -c constraints.txt ./sdk . \
    && useradd --system --home /data taskcost && mkdir -p /data && chown taskcost /data

USER taskcost
ENV TASKCOST_DB=/data/taskcost.duckdb \
    TASKCOST_HOST=0.0.0.0 \
    TASKCOST_PORT=4318
VOLUME ["/data"]
EXPOSE 4318 4317
CMD ["taskcost", "serve"]
