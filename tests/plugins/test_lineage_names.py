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


def test_a_named_table_carries_its_catalog_name_as_a_symlink_and_an_upstream_named_only_is_a_hive_dataset(lake):
    from sluice_airflow.lineage import operator_lineage

    from sluice.settings import load_settings
    from tests.helpers import make_spec, orders_spec, write_spec

    settings = load_settings({"SLUICE_LAKE_ROOT": str(lake.lake_root), "SLUICE_PIPELINES": str(lake.pipelines_dir),
                              "SLUICE_CATALOG_URI": "thrift://metastore:9083"})
    write_spec(lake.pipelines_dir, orders_spec(sink={"path": "bronze/orders", "table": "bronze.orders"}))
    bronze = operator_lineage(make_spec(orders_spec(sink={"path": "bronze/orders", "table": "bronze.orders"})),
                              settings, None)
    links = [(o.name, [(i.namespace, i.name, i.type) for i in o.facets["symlinks"].identifiers])
             for o in bronze.outputs]
    assert links == [(str(lake.lake_root / "bronze" / "orders"), [("hive://metastore:9083", "bronze.orders", "TABLE")]),
                     (str(lake.lake_root / "_quarantine" / "orders"),
                      [("hive://metastore:9083", "bronze.orders_quarantine", "TABLE")])]
    silver = operator_lineage(make_spec({"name": "silver", "source": {"format": "delta", "table": "bronze.orders"}}),
                              settings, None)
    assert [(i.namespace, i.name, [x.name for x in i.facets["symlinks"].identifiers]) for i in silver.inputs] == [
        ("file", str(lake.lake_root / "bronze" / "orders"), ["bronze.orders"])]
    outside = operator_lineage(make_spec({"name": "gold", "source": {"format": "delta", "table": "finance.fx"}}),
                               settings, None)
    assert [(i.namespace, i.name, i.facets) for i in outside.inputs] == [("hive://metastore:9083", "finance.fx", {})]
    assert "symlinks" not in operator_lineage(make_spec(orders_spec()), load_settings({}), None).outputs[0].facets
