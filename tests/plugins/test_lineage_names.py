"""OpenLineage dataset names of sluice's tables and folders (the naming spec: a chain meets on one name)."""

from __future__ import annotations

import os

from sluice_airflow.lineage import dataset_name


def test_dataset_names_follow_the_openlineage_naming_spec(tmp_path):
    assert dataset_name("s3a://lake/bronze/orders/") == ("s3://lake", "bronze/orders")
    assert dataset_name("s3://lake/bronze/orders") == ("s3://lake", "bronze/orders")
    assert dataset_name(str(tmp_path / "bronze")) == ("file", str(tmp_path / "bronze"))
    assert dataset_name(f"file://{tmp_path}/landing%20zone") == ("file", f"{tmp_path}/landing zone")
    assert dataset_name("lake/bronze") == ("file", os.path.abspath("lake/bronze"))
    assert dataset_name("hdfs://namenode:8020/lake/bronze") == ("hdfs://namenode:8020", "/lake/bronze")
