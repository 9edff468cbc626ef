# taskcost collector: OTLP/HTTP intake, SQL API and dashboards on one port, OTLP/gRPC on another, DuckDB file under
# /data. It binds 0.0.0.0, so it needs API keys: its first start on an empty /data creates an ingest and a read key
# of project "default" (TASKCOST_FIRST_KEYS_PROJECT) and prints their secrets once to the log.
FROM python:3.11-slim

# EXTRAS="[clickhouse]": the image of the scale profile's collectors (the store on a ClickHouse server)
ARG EXTRAS=""
WORKDIR /app
COPY constraints.txt pyproject.toml setup.py README.md ./
COPY sdk ./sdk
COPY taskcost ./taskcost
COPY dashboards ./dashboards
# gcc for the intake's compiled OTLP wire reader (setup.py), removed again in the same layer; without it the install
# would go on and the collector read requests through protobuf, more slowly
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir -c constraints.txt ./sdk ".${EXTRAS}" \
    && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
    && python -c "import taskcost.normalize._wire" \
    && useradd --system --home /data taskcost && mkdir -p /data && chown taskcost /data

USER taskcost
ENV TASKCOST_DB=/data/taskcost.duckdb \
    TASKCOST_HOST=0.0.0.0 \
    TASKCOST_PORT=4318 \
    TASKCOST_GRPC_PORT=4317 \
    TASKCOST_FIRST_KEYS_PROJECT=default
VOLUME ["/data"]
EXPOSE 4318 4317
CMD ["taskcost", "serve"]
