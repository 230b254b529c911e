"""docker-compose.yaml and the Dockerfile, checked against the project (this machine has no Docker engine to
start them): the services and how they wait for each other, healthchecks, the object store every Spark
process needs, and settings that must agree with the project's own (connections, versions, paths)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from sluice.settings import load_settings

PROJECT = Path(__file__).resolve().parent.parent
AIRFLOW = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
LONG_RUNNING = (*AIRFLOW, "postgres", "spark-master", "spark-worker", "kafka", "s3", "metastore")
SPARK_PROCESSES = (*AIRFLOW, "spark-worker")  # the drivers run in the Airflow containers, the executors on the worker


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((PROJECT / "docker-compose.yaml").read_text(encoding="utf-8"))


def env(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def mounts(service: dict) -> dict[str, str]:
    """Volume source -> path in the container."""
    return {v.split(":")[0]: v.split(":")[1] for v in service.get("volumes") or []}


def compose_config(path: Path) -> subprocess.CompletedProcess:
    """`docker-compose config`: Compose's own schema check and interpolation; it needs no Docker engine."""
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is missing: `make install` installs Debian's docker-compose package"
    return subprocess.run([tool, "-f", str(path), "config"], capture_output=True, text=True, timeout=120,
                          cwd=PROJECT, env={"PATH": "/usr/bin:/bin", "HOME": str(PROJECT)})


def test_docker_compose_accepts_the_file_and_resolves_it_to_the_same_services(compose, tmp_path):
    done = compose_config(PROJECT / "docker-compose.yaml")
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert set(resolved["services"]) == set(compose["services"])
    # the anchors and defaults resolve: every Airflow service gets the shared settings, the admin password
    # and the JWT secret their defaults
    for name in (*AIRFLOW, "airflow-init"):
        e = resolved["services"][name]["environment"]
        assert e["AIRFLOW__API_AUTH__JWT_SECRET"] == "change-me-in-production", name
        assert e["SLUICE_LAKE_ROOT"] == "s3a://lake/lake", name
    assert resolved["services"]["airflow-init"]["environment"]["SLUICE_ADMIN_PASSWORD"] == "admin"
    # the store's one identity and every client's credentials resolve to the same pair
    store = resolved["services"]["s3"]["environment"]
    for name in (*SPARK_PROCESSES, "airflow-init"):
        e = resolved["services"][name]["environment"]
        assert (e["AWS_ACCESS_KEY_ID"], e["AWS_SECRET_ACCESS_KEY"]) == (store["S3_ACCESS_KEY"], store["S3_SECRET_KEY"])
    # and the check can fail: a misspelt key is refused, naming it
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text((PROJECT / "docker-compose.yaml").read_text(encoding="utf-8").replace(
        "    healthcheck:\n      test: [\"CMD\", \"pg_isready\"", "    healthchek:\n      test: [\"CMD\", \"pg_isready\"",
        1), encoding="utf-8")
    refused = compose_config(broken)
    assert refused.returncode == 1 and "Unsupported config option for services.postgres: 'healthchek'" in refused.stderr


def test_the_services_of_a_team_set_up(compose):
    assert set(compose["services"]) == {*LONG_RUNNING, "airflow-init"}
    for name in LONG_RUNNING:
        check = compose["services"][name].get("healthcheck")
        assert check and check["test"], f"{name} has no healthcheck"
        assert compose["services"][name].get("restart") == "unless-stopped", name
    assert compose["services"]["airflow-init"]["restart"] == "no"


def test_one_image_built_from_the_repo_for_every_sluice_service(compose):
    for name in (*AIRFLOW, "airflow-init", "spark-master", "spark-worker", "metastore"):
        service = compose["services"][name]
        assert (service["image"], service["build"]) == ("sluice:local", "."), name
    text = (PROJECT / "docker-compose.yaml").read_text(encoding="utf-8")
    assert "_PIP_ADDITIONAL_REQUIREMENTS" not in text
    dockerfile = (PROJECT / "Dockerfile").read_text(encoding="utf-8")
    assert "-r requirements.lock" in dockerfile
    # the jars come from the pinned pom's profiles, at build time
    profiles = {p.findtext("{*}id") for p in ET.parse(PROJECT / "pom.xml").getroot().findall(".//{*}profile")}
    used = set(re.findall(r"mvn -q -B -P ([\w-]+) package", dockerfile))
    assert used == {"spark-jars", "kafka-broker", "s3-jars", "catalog-jars"} <= profiles
    assert "openjdk-17" in dockerfile and "python:3.11" in dockerfile
    assert "make sluice-jar" in dockerfile  # sluice's own classes (jvm/json), compiled in the image
    ignored = (PROJECT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".venv", "var", ".git"} <= set(ignored)


def test_the_airflow_services_share_one_configuration_on_postgres(compose):
    services = compose["services"]
    postgres = env(services["postgres"])
    url = f"postgresql+psycopg2://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@postgres:5432/{postgres['POSTGRES_DB']}"
    common = env(services["airflow-apiserver"])
    for name in (*AIRFLOW, "airflow-init"):
        e = env(services[name])
        assert e["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url, name
        assert e["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
                    "SLUICE_LAKE_ROOT", "SLUICE_CHECKPOINT_ROOT", "AIRFLOW__CORE__DAGS_FOLDER"):
            assert e[key] == common[key], (name, key)
    # tasks reach the api-server at its service name and the port it serves
    api = services["airflow-apiserver"]
    port = api["command"][api["command"].index("--port") + 1]
    assert common["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"http://airflow-apiserver:{port}/execution/"
    assert f"{port}:{port}" in api["ports"]
    # psycopg2 is pinned for the image (and make stack)
    assert re.search(r"^psycopg2-binary==", (PROJECT / "requirements.lock").read_text(encoding="utf-8"), re.M)


def test_services_start_in_order_once_what_they_need_is_healthy(compose):
    services = compose["services"]
    assert services["airflow-init"]["depends_on"] == {"postgres": {"condition": "service_healthy"},
                                                      "s3": {"condition": "service_healthy"}}
    for name in AIRFLOW:
        depends = services[name]["depends_on"]
        assert depends["postgres"] == {"condition": "service_healthy"}, name
        assert depends["airflow-init"] == {"condition": "service_completed_successfully"}, name
    scheduler = services["airflow-scheduler"]["depends_on"]
    for needed in ("spark-master", "kafka", "airflow-apiserver"):
        assert scheduler[needed] == {"condition": "service_healthy"}
    assert services["spark-worker"]["depends_on"] == {"spark-master": {"condition": "service_healthy"},
                                                      "s3": {"condition": "service_healthy"}}
    for deps in (s.get("depends_on") or {} for s in services.values()):
        assert set(deps) <= set(services)
        for target in deps:
            if deps[target]["condition"] == "service_healthy":
                assert services[target].get("healthcheck"), target


def test_every_spark_process_reaches_the_lake_and_the_checkpoints_in_the_object_store(compose):
    """No shared volume: the lake, the checkpoints, the locks and the ledger are in the s3 service's bucket, which
    every Spark process reaches with the same settings, so the services can run on different hosts."""
    services = compose["services"]
    assert {"postgres", "kafka", "airflow-shared", "s3"} <= set(compose["volumes"])
    assert not {"lake", "checkpoints"} & set(compose["volumes"])
    scheduler = env(services["airflow-scheduler"])
    assert scheduler["SLUICE_LAKE_ROOT"].startswith("s3a://") and scheduler["SLUICE_CHECKPOINT_ROOT"].startswith("s3a://")
    keys = ("SLUICE_LAKE_ROOT", "SLUICE_CHECKPOINT_ROOT", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY")
    for name in SPARK_PROCESSES:
        assert {k: env(services[name])[k] for k in keys} == {k: scheduler[k] for k in keys}, name
        assert not {"lake", "checkpoints"} & set(mounts(services[name])), name
    # the processes that run spark-submit and its executors start once the store is healthy (the other Airflow
    # services wait for airflow-init, which waits for it)
    for name in ("airflow-scheduler", "spark-worker", "airflow-init"):
        assert services[name]["depends_on"]["s3"] == {"condition": "service_healthy"}, name
    # the endpoint is the s3 service's hostname and the port its gateway serves
    store = services["s3"]
    script = store["command"][-1]
    port = re.search(r"-s3\.port=(\d+)", script).group(1)
    assert scheduler["AWS_ENDPOINT_URL"] == f"http://{store['hostname']}:{port}"
    assert f"localhost:{port}/healthz" in " ".join(store["healthcheck"]["test"])
    assert "copy_1 = 1" in script and "-master.telemetry=false" in script  # the settings learnt in s3_server.py
    # the init service creates the bucket both roots name, once the store is healthy
    bucket = scheduler["SLUICE_LAKE_ROOT"].split("/")[2]
    assert scheduler["SLUICE_CHECKPOINT_ROOT"].split("/")[2] == bucket
    assert f"sluice s3 create-bucket {bucket}" in services["airflow-init"]["command"][-1]
    assert services["airflow-init"]["depends_on"]["s3"] == {"condition": "service_healthy"}
    # the drivers run in the scheduler's container (LocalExecutor); executors connect back to its hostname
    assert scheduler["SPARK_LOCAL_IP"] == services["airflow-scheduler"]["hostname"] == "airflow-scheduler"


def test_the_object_store_is_the_seaweedfs_the_tests_run(compose):
    from devservices.s3_server import SEAWEEDFS_MODULE, SEAWEEDFS_VERSION

    store = compose["services"]["s3"]
    assert store["build"] == {"context": ".", "target": "s3"} and store["image"] == "sluice-s3:local"
    dockerfile = (PROJECT / "Dockerfile").read_text(encoding="utf-8")
    assert f"ARG SEAWEEDFS_VERSION={SEAWEEDFS_VERSION}\n" in dockerfile
    assert f'go mod download -json "{SEAWEEDFS_MODULE}@${{SEAWEEDFS_VERSION}}"' in dockerfile
    assert re.search(r"^FROM \S+ AS s3$", dockerfile, re.M)
    # the sluice image stays the default target: the last stage
    assert dockerfile.rstrip().split("\nFROM ")[-1].startswith("python:3.11-slim-bookworm AS sluice")


def test_the_connections_the_init_service_defines_match_the_services(compose):
    services = compose["services"]
    script = services["airflow-init"]["command"][-1]
    assert "airflow db migrate" in script and "passwords.json" in script
    conns = dict(re.findall(r"airflow connections add (\w+) --conn-json '([^']+)'", script))
    spark = json.loads(conns[env(services["airflow-scheduler"])["SLUICE_SPARK_CONN_ID"]])
    master = services["spark-master"]["command"]
    assert (spark["host"], spark["port"]) == (f"spark://{master[master.index('--host') + 1]}",
                                            int(master[master.index("--port") + 1]))
    worker = services["spark-worker"]["command"]
    assert f"{spark['host']}:{spark['port']}" in worker
    kafka = json.loads(conns["sluice_kafka"])
    advertised = env(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised == f"PLAINTEXT://{kafka['host']}:{kafka['port']}"
    # the admin user of the simple auth manager, with the password the init service writes
    assert env(services["airflow-apiserver"])["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
    assert (env(services["airflow-apiserver"])["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
            == "/opt/airflow/shared/passwords.json")
    assert mounts(services["airflow-apiserver"])["airflow-shared"] == "/opt/airflow/shared"


def test_the_kafka_service_runs_the_projects_kafka_version_in_kraft_mode(compose):
    kafka = compose["services"]["kafka"]
    version = ET.parse(PROJECT / "pom.xml").getroot().findtext("{*}properties/{*}kafka.version")
    assert kafka["image"] == f"apache/kafka:{version}"
    e = env(kafka)
    assert e["KAFKA_PROCESS_ROLES"] == "broker,controller" and "ZOOKEEPER" not in " ".join(e)
    assert e["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_spark_submits_are_admitted_by_the_sluice_pool_not_by_a_global_parallelism(compose):
    # every Airflow service keeps Airflow's own parallelism; airflow-init creates the pool (once: a resized
    # pool keeps its slots) with the slots every service is told, and the DAGs put each task in it
    services = compose["services"]
    airflow = [s for name, s in services.items() if name.startswith("airflow")]
    assert airflow and not any("AIRFLOW__CORE__PARALLELISM" in env(s) for s in airflow)
    assert {env(s)["SLUICE_POOL_SLOTS"] for s in airflow} == {"${SLUICE_POOL_SLOTS:-4}"}
    script = services["airflow-init"]["command"][-1]
    created = re.search(r'airflow pools get "\$\$\{SLUICE_AIRFLOW_POOL:-sluice\}" > /dev/null 2>&1 \|\| '
                        r'airflow pools set "\$\$\{SLUICE_AIRFLOW_POOL:-sluice\}" "\$\$\{SLUICE_POOL_SLOTS\}" ', script)
    assert created and script.index("airflow db migrate") < created.start()


def test_the_metastore_keeps_the_table_names_on_postgres_and_every_run_registers_there(compose):
    """The catalog of table names (docs/catalog.md): ``sluice catalog serve`` -- the metastore ``make catalog-up``
    runs, in the foreground -- on a database of its own on postgres, made by postgres's init script; every
    sluice service registers and reads names there, and the scheduler (where runs register) waits for it."""
    services = compose["services"]
    metastore = services["metastore"]
    assert metastore["command"] == ["sluice", "catalog", "serve"]
    settings = load_settings({k: str(v) for k, v in env(metastore).items()})
    assert (settings.catalog_port, settings.catalog_bind, settings.catalog_db["url"], settings.catalog_db["driver"]) \
        == (9083, "0.0.0.0", "jdbc:postgresql://postgres:5432/metastore", "org.postgresql.Driver")
    postgres = env(services["postgres"])
    assert (settings.catalog_db["user"], settings.catalog_db["password"]) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])
    init = next(v for v in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in str(v))
    script = PROJECT / str(init["source"] if isinstance(init, dict) else init.split(":")[0])
    assert script.read_text(encoding="utf-8").splitlines()[-1] == (
        f"CREATE DATABASE metastore OWNER {postgres['POSTGRES_USER']};")
    assert metastore["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "9083" in " ".join(metastore["healthcheck"]["test"])
    for name in (*AIRFLOW, "spark-worker"):
        assert env(services[name])["SLUICE_CATALOG_URI"] == "thrift://metastore:9083", name
    assert services["airflow-scheduler"]["depends_on"]["metastore"] == {"condition": "service_healthy"}
