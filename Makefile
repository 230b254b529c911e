# sluice — the two commands: `make demo` and `make test`. Everything else is a step they call.
# All targets are idempotent: a step whose inputs did not change is skipped (stamp files under var/).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
STAMPS := var/stamps

# Spark binds to loopback; PySpark workers use the project's interpreter.
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python

.PHONY: help install setup venv jars airflow-db demo test test-fast bench lock lint docs chaos chaos-jar sluice-jar jvm-archive clean clean-cache clean-data airflow-standalone kafka-up kafka-down catalog-up catalog-down s3-server s3-up s3-down stack stack-down system-packages

help:
	@echo "make demo    install everything, ingest sample data twice through Airflow, show the table"
	@echo "make test    install everything and run the test suite"
	@echo "make bench   sluice vs plain Spark, same machine, same run: bench/results/bench.{md,json,png}"
	@echo "make docs    regenerate docs/spec.md (the spec reference) from the models' field docstrings"
	@echo "make install the virtualenv (.venv), the jars (var/jars) and the Airflow DB (var/airflow)"
	@echo "make airflow-standalone   the Airflow UI on http://127.0.0.1:8080 (SQLite; the sluice pool admits the spark-submits)"
	@echo "make kafka-up / kafka-down  a local Kafka broker (KRaft) on 127.0.0.1:9092 (SLUICE_KAFKA_PORT)"
	@echo "make catalog-up / catalog-down  the local catalog of table names (a Hive metastore) on 127.0.0.1:9083 (SLUICE_CATALOG_PORT)"
	@echo "make s3-up / s3-down  a local S3 server (SeaweedFS) on 127.0.0.1:8333 (SLUICE_S3_PORT); its credentials: sluice s3 env"
	@echo "make chaos   kill runs at random moments (50 rounds per pipeline): 0 lost, 0 duplicated, or exit 1"
	@echo "             CHAOS_STORAGE=s3: tables and checkpoints in a bucket of the local S3 server, which is also stopped mid-run"
	@echo "make stack / stack-down  docker-compose's topology as local processes: PostgreSQL, Airflow, Spark standalone, Kafka"

# --- set-up ---------------------------------------------------------------------------------------

venv: $(STAMPS)/venv
$(STAMPS)/venv: pyproject.toml requirements.lock
	@mkdir -p $(STAMPS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "uv==$(UV_VERSION)"
	$(BIN)/uv pip install --python $(BIN)/python -q -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python -q --no-deps -e .
	# Byte-compile what is installed: uv does not, and with PYTHONDONTWRITEBYTECODE set (as on CI machines)
	# Python never writes the .pyc itself, so every process (each run's driver, the CLI, Airflow) would
	# compile its imports from source again: ~1 s of every run (docs/performance.md).
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib/python3.11/site-packages sluice sluice_cli devservices spark_jobs plugins > /dev/null
	@touch $@

# After changing pyproject.toml's dependencies: pin the whole set again.
lock: $(STAMPS)/venv
	$(BIN)/uv pip compile pyproject.toml --extra test --extra bench --extra team --python-version 3.11 -q -o requirements.lock

# Unused names and import order (pyflakes + isort rules), with a pinned ruff run by uv.
RUFF_VERSION := 0.14.5
lint: $(STAMPS)/venv
	$(BIN)/uvx ruff@$(RUFF_VERSION) check --select F,I sluice sluice_cli devservices spark_jobs include tests plugins dags bench

# docs/spec.md, the spec reference, rendered from the spec models' field docstrings (sluice/spec/reference.py).
docs: $(STAMPS)/venv
	$(BIN)/python -m sluice.spec.reference

# Delta + the Kafka connector (var/jars/spark), the Kafka broker (var/jars/kafka) and Hadoop's S3A file system
# (var/jars/s3), from pom.xml.
jars: $(STAMPS)/jars
$(STAMPS)/jars: pom.xml
	@mkdir -p $(STAMPS)
	rm -rf var/jars/spark var/jars/kafka var/jars/s3 var/jars/catalog
	mvn -q -B -Dstyle.color=never -P spark-jars package
	mvn -q -B -Dstyle.color=never -P kafka-broker package
	mvn -q -B -Dstyle.color=never -P s3-jars package
	mvn -q -B -Dstyle.color=never -P catalog-jars package
	@touch $@

# The fault-injecting file systems of the chaos tests (jvm/chaos: local disk and S3A), compiled against pyspark's
# own Hadoop jars and S3A's (var/jars/s3).
chaos-jar: $(STAMPS)/chaos-jar
$(STAMPS)/chaos-jar: $(STAMPS)/venv $(STAMPS)/jars $(wildcard jvm/chaos/dev/sluice/chaos/*.java)
	@mkdir -p $(STAMPS) var/build/chaos var/jars/chaos
	rm -rf var/build/chaos/*
	javac -nowarn -d var/build/chaos -cp "$$($(BIN)/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*:var/jars/s3/*" jvm/chaos/dev/sluice/chaos/*.java
	jar cf var/jars/chaos/sluice-chaos.jar -C var/build/chaos .
	@touch $@

# sluice's own JVM classes (jvm/json: the field scan of JSON records, spark_jobs/quality/records.py; jvm/files: the
# file source's discovery index, source.discovery: index, whose listing after a mark in a bucket calls S3A's SDK
# client: compiled against var/jars/s3 too, loaded only in a run that has them), compiled against pyspark's jars into var/jars/sluice, which
# every run hands to spark-submit (each jar made aside and renamed into place: a running JVM keeps reading the one
# it opened); and jvm/catalog (Hive's metastore
# server on one address, sluice/operations/catalog.py) into var/jars/metastore.
sluice-jar: $(STAMPS)/sluice-jar
$(STAMPS)/sluice-jar: $(STAMPS)/venv $(STAMPS)/jars $(wildcard jvm/json/dev/sluice/json/*.java) $(wildcard jvm/files/dev/sluice/files/*.java) $(wildcard jvm/catalog/dev/sluice/catalog/*.java)
	@mkdir -p $(STAMPS) var/build/json var/build/files var/build/catalog var/jars/sluice var/jars/metastore
	rm -rf var/build/json/* var/build/files/* var/build/catalog/*
	javac -nowarn --release 17 -d var/build/json -cp "$$($(BIN)/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*" jvm/json/dev/sluice/json/*.java
	jar cf var/jars/sluice/sluice-json.jar.tmp -C var/build/json . && mv var/jars/sluice/sluice-json.jar.tmp var/jars/sluice/sluice-json.jar
	javac -nowarn --release 17 -d var/build/files -cp "$$($(BIN)/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*:var/jars/s3/*" jvm/files/dev/sluice/files/*.java
	jar cf var/jars/sluice/sluice-files.jar.tmp -C var/build/files . && mv var/jars/sluice/sluice-files.jar.tmp var/jars/sluice/sluice-files.jar
	javac -nowarn --release 17 -d var/build/catalog -cp "$$($(BIN)/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/jars/*" jvm/catalog/dev/sluice/catalog/*.java
	jar cf var/jars/metastore/sluice-metastore.jar.tmp -C var/build/catalog . && mv var/jars/metastore/sluice-metastore.jar.tmp var/jars/metastore/sluice-metastore.jar
	@touch $@

# A class data archive of a warm-up run's JVM (sluice/launch/jvm_archive.py): every driver starts ~5 s sooner.
jvm-archive: $(STAMPS)/jvm-archive
$(STAMPS)/jvm-archive: $(STAMPS)/venv $(STAMPS)/jars $(STAMPS)/sluice-jar spark_jobs/warmup.py sluice/launch/jvm_archive.py
	$(BIN)/python -m sluice.launch.jvm_archive
	@touch $@

# The local S3 server (SeaweedFS), built once per version from its pinned Go module into the user's build cache
# (~/.cache/sluice/seaweedfs, keyed by module version, Go version and flags; devservices/build_cache.py) and copied to
# var/bin/weed: ~7 min the first time on a machine, with ~4 GB of Go caches in var/go (deleted after the build);
# a second clone copies the checked binary. Skipped while the pinned binary is in var/bin. The builder needs only
# Python's standard library: it runs on $(PYTHON), so `make setup` starts it before the virtualenv is made.
s3-server:
	$(PYTHON) -m devservices.s3_server build

airflow-db: $(STAMPS)/airflow-db
$(STAMPS)/airflow-db: $(STAMPS)/venv
	$(BIN)/sluice airflow db migrate > /dev/null
	@touch $@

install: venv jars sluice-jar chaos-jar jvm-archive airflow-db system-packages

# The whole set-up of `make test`, `make bench` and `make chaos`, its steps side by side where they may be: the
# SeaweedFS build (Go: minutes of CPU on a fresh machine) runs while the jars download, the Debian packages
# install and the JVM class archive's warm-up run runs (their output interleaved, a line at a time). SETUP_JOBS=1: one
# step after another.
SETUP_JOBS ?= 4
setup:
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) install s3-server

# --- the two commands ---------------------------------------------------------------------------

demo: install
	$(BIN)/python include/demo.py

# The suite on two pytest-xdist workers (worksteal), the longest tests dealt out first (tests/durations.json,
# written by SLUICE_RECORD_DURATIONS=path); each worker has its own SparkSession, Kafka broker, S3 server and
# Airflow home, and every server a test starts takes free ports. Measured on the 2-core machine: a mix of
# Airflow, spark-submit and in-process tests took 881 s on two workers against 1125 s one after the other
# (docs/development.md, "How the suite runs"). PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist worksteal)

# Every test but those marked chaos (many kill rounds: `make chaos` runs them).
test: setup
	$(PYTEST) -m "not chaos"

bench: setup
	$(BIN)/python -m bench.run_bench

# The suite's chaos tests (every kill point, local and in a bucket), then kill runs at random moments, 50 rounds
# per pipeline (files, Kafka, MERGE); 0 lost / 0 duplicated or exit 1.
chaos: setup
	$(PYTEST) -m chaos
	$(BIN)/python -m bench.chaos --rounds $${CHAOS_ROUNDS:-50} --storage $${CHAOS_STORAGE:-local} $${CHAOS_ARGS:---parallel}

# The inner loop: no process of Spark or Airflow, no long in-process scenario (marked slow).
test-fast: setup
	$(PYTEST) -m "not e2e and not chaos and not slow"

# --- running things by hand ------------------------------------------------------------------------

airflow-standalone: install
	$(BIN)/sluice airflow standalone

# Debian packages: PostgreSQL (the stack's metadata DB), Chromium (the UI test drives it through Playwright;
# browser downloads do not work here) and docker-compose (its `config` validates docker-compose.yaml without a
# Docker engine). Checked on every call, installed only when missing.
system-packages:
	@missing=""; \
	  ls /usr/lib/postgresql/*/bin/postgres > /dev/null 2>&1 || missing="$$missing postgresql"; \
	  command -v chromium > /dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v docker-compose > /dev/null 2>&1 || missing="$$missing docker-compose"; \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	    echo "installing Debian packages:$$missing"; \
	    $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; fi

# The sample DAGs run on their schedules once it is up: a first drop of sample data lands if the lake has none.
stack: setup
	$(BIN)/sluice stack up
	@eval "$$($(BIN)/sluice stack env)" && $(BIN)/python include/generate_sample_data.py --drop 1 --if-empty \
	  --kafka "127.0.0.1:$${SLUICE_KAFKA_PORT:-9092}"

stack-down: venv
	$(BIN)/sluice stack down

kafka-up: venv jars
	$(BIN)/sluice kafka up

kafka-down: venv
	$(BIN)/sluice kafka down

catalog-up: venv
	$(BIN)/sluice catalog up

catalog-down: venv
	$(BIN)/sluice catalog down

s3-up: venv s3-server
	$(BIN)/sluice s3 up

s3-down: venv
	$(BIN)/sluice s3 down

clean-data:
	rm -rf var/lake var/checkpoints

# The clone's own set-up; the user's build cache (outside the clone, shared by clones) stays: see clean-cache.
clean:
	chmod -R u+w var/go 2> /dev/null || true  # Go keeps its module cache read-only
	rm -rf $(VENV) var target

# The user's build cache of outputs keyed by pinned versions (the SeaweedFS binary; devservices/build_cache.py): the
# next `make s3-server` builds again.
clean-cache: venv
	rm -rf "$$($(BIN)/python -c 'from devservices.build_cache import cache_root; print(cache_root())')"
