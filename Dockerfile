# syntax=docker/dockerfile:1
# One image for every sluice service of docker-compose.yaml: the Airflow 3 services, the Spark standalone master
# and worker, and the spark-submit drivers the Airflow tasks start. It holds the project, its pinned Python
# dependencies (requirements.lock) and the jars Maven fetches from the pinned pom.xml -- nothing is downloaded
# at run time. The object store (target `s3`) is SeaweedFS built from the same pinned Go module as
# `make s3-server` (devservices/s3_server.py), so the team's store is the one the tests run against.

# --- the object store: SeaweedFS from its pinned Go module ----------------------------------------------------
FROM golang:1.26-bookworm AS seaweedfs-build
ARG SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
# `go install module@version` is refused (its go.mod has a replace directive): download the module, build in it
RUN dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@${SEAWEEDFS_VERSION}" \
          | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') \
 && cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags=-s -o /weed ./weed

FROM debian:bookworm-slim AS s3
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=seaweedfs-build /weed /usr/local/bin/weed
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["weed", "version"]

# --- sluice (the default target) ---------------------------------------------------------------------------
FROM python:3.11-slim-bookworm AS sluice

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven make curl procps tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/sluice
# dependencies first: the layers stay cached while only the project's code changes
COPY pyproject.toml requirements.lock ./
RUN python -m venv .venv \
 && .venv/bin/pip install -q --no-cache-dir "uv==0.13.9" \
 && .venv/bin/uv pip install --python .venv/bin/python -q --no-cache --compile-bytecode -r requirements.lock
COPY pom.xml ./
RUN mvn -q -B -P spark-jars package && mvn -q -B -P kafka-broker package && mvn -q -B -P s3-jars package \
 && mvn -q -B -P catalog-jars package \
 && rm -rf /root/.m2 target

COPY . .
RUN .venv/bin/uv pip install --python .venv/bin/python -q --no-cache --no-deps -e . \
 && mkdir -p var/stamps && touch var/stamps/venv && make sluice-jar \
 && mkdir -p /data/lake /data/checkpoints

ENV PATH=/opt/sluice/.venv/bin:/opt/sluice/.venv/lib/python3.11/site-packages/pyspark/bin:$PATH \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    SPARK_HOME=/opt/sluice/.venv/lib/python3.11/site-packages/pyspark \
    SLUICE_HOME=/opt/sluice \
    SLUICE_JARS=/opt/sluice/var/jars \
    SLUICE_LAKE_ROOT=/data/lake \
    SLUICE_CHECKPOINT_ROOT=/data/checkpoints \
    PYSPARK_PYTHON=/opt/sluice/.venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/sluice/.venv/bin/python \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/sluice/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/sluice/plugins

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["sluice", "--help"]
