"""The environment Airflow and spark-submit run in when started by the project (`sluice airflow`, the
make targets, `sluice run`): one function, so every entry point sees the same folders and connections."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sluice.launch.submit import spark_env
from sluice.settings import Settings


def spark_connection_env(settings: Settings) -> dict[str, str]:
    """``AIRFLOW_CONN_<ID>`` defining the project's Spark connection (master ``SLUICE_SPARK_MASTER``)."""
    value = json.dumps({"conn_type": "spark", "host": settings.spark_master})
    return {f"AIRFLOW_CONN_{settings.spark_conn_id.upper()}": value}


def project_env(settings: Settings) -> dict[str, str]:
    """The environment Airflow and spark-submit run in: the project's AIRFLOW_HOME, DAG and plugin
    folders, the Spark connection (unless one is defined already), the lake and checkpoint roots."""
    bin_dir = str(Path(sys.executable).parent)
    env = {
        "AIRFLOW_HOME": str(settings.airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(settings.home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(settings.home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "2",
        # the local UI (`airflow standalone`) listens on loopback only
        "AIRFLOW__API__HOST": "127.0.0.1",
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        **spark_env(settings),
    }
    kafka = json.dumps({"conn_type": "kafka", "host": "127.0.0.1", "port": settings.kafka_port,
                        "extra": {"security.protocol": "PLAINTEXT"}})
    for key, value in {**spark_connection_env(settings), "AIRFLOW_CONN_SLUICE_KAFKA": kafka}.items():
        env[key] = os.environ.get(key, value)
    return env
