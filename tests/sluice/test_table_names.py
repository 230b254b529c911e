"""Table names without a JVM: the spec's names (checked, lower-cased, defaults), the settings that pick the
catalog and turn names on, the folder's lookups by name, and what the local metastore is started with."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.operations.catalog import (
    CatalogError,
    hive_site,
    reader_conf,
    server_command,
    server_jars,
)
from sluice.settings import load_settings
from sluice.spec import SpecError
from sluice.spec.catalog import PipelineCatalog, resolve_upstream
from tests.helpers import make_spec, orders_spec, write_spec


def test_a_table_name_is_schema_dot_table_in_lower_case_and_the_quarantine_gets_one_beside_it():
    spec = make_spec(orders_spec(sink={"path": "bronze/orders", "table": "Spark_Catalog.Bronze.Orders"}))
    settings = load_settings({})
    assert (spec.sink.table, spec.table_name(settings), spec.quarantine_table_name(settings)) == (
        "bronze.orders", "bronze.orders", "bronze.orders_quarantine")
    own = make_spec(orders_spec(sink={"table": "bronze.orders"}, quarantine_table="ops.bad_orders"))
    assert own.quarantine_table_name(settings) == "ops.bad_orders"
    assert make_spec(orders_spec()).table_name(settings) is None  # no name: the table is a folder, as before


@pytest.mark.parametrize("name", ["orders", "a.b.c", "hive.bronze.orders", "bronze.or-ders", "1x.orders", "bronze."])
def test_a_name_that_is_not_schema_dot_table_is_refused_with_the_form_it_takes(name):
    with pytest.raises(SpecError) as refused:
        make_spec(orders_spec(sink={"table": name}))
    assert f"sink.table: {name!r} is not a table name: give schema.table (e.g. bronze.orders)" in str(refused.value)


def test_names_for_every_table_are_made_from_the_sink_folder_when_the_setting_says_auto():
    auto = load_settings({"SLUICE_TABLE_NAMES": "auto"})
    assert make_spec(orders_spec(sink={"path": "bronze/orders"})).table_name(auto) == "bronze.orders"
    assert make_spec(orders_spec(sink={"path": "lake/bronze/orders"})).table_name(auto) == "default.orders"
    assert make_spec(orders_spec(sink={"path": "/data/bronze/orders"})).table_name(auto) == "default.orders"
    assert make_spec(orders_spec(sink={})).table_name(auto) == "default.orders"
    assert make_spec(orders_spec(sink={"path": "bronze/orders", "table": "x.y"})).table_name(auto) == "x.y"
    with pytest.raises(ValueError, match=r"SLUICE_TABLE_NAMES='yes' is not a choice: set it to 'auto'"):
        load_settings({"SLUICE_TABLE_NAMES": "yes"})


def test_the_catalog_is_the_local_metastore_unless_a_thrift_address_names_another():
    local = load_settings({"SLUICE_CATALOG_PORT": "9999", "SLUICE_CATALOG_HOME": "/tmp/cat"})
    assert (local.catalog_uri, local.metastore_uri, local.catalog_home) == (None, "thrift://127.0.0.1:9999",
                                                                           Path("/tmp/cat"))
    team = load_settings({"SLUICE_CATALOG_URI": "thrift://metastore:9083, thrift://standby:9083"})
    assert team.metastore_uri == "thrift://metastore:9083,thrift://standby:9083"
    assert reader_conf(team) == {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": "thrift://metastore:9083,thrift://standby:9083",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}
    assert reader_conf(local)["spark.sql.warehouse.dir"] == "/tmp/cat/warehouse"
    with pytest.raises(ValueError, match=r"SLUICE_CATALOG_URI='metastore:9083' is not a metastore address: give "
                                         r"thrift://host:port"):
        load_settings({"SLUICE_CATALOG_URI": "metastore:9083"})


def test_the_local_metastore_runs_hive_s_server_from_pyspark_s_jars_on_derby_in_its_folder(tmp_path):
    jars = server_jars(load_settings().jars_dir)
    assert [j.name for j in jars] == ["sluice-metastore.jar"]
    command = server_command(tmp_path, 9555, jars)
    assert command[-3:] == ["dev.sluice.catalog.BoundMetastore", "127.0.0.1", "9555"]  # this host only
    assert server_command(tmp_path, 9083, jars, bind="0.0.0.0")[-2:] == ["0.0.0.0", "9083"]  # a container's
    classpath = command[command.index("-cp") + 1].split(":")
    assert classpath[0] == str(tmp_path / "conf") and classpath[-1].endswith("pyspark/jars/*")
    assert classpath[1] == str(jars[0])
    assert list(Path(classpath[-1][:-2]).glob("hive-metastore-2.3.*.jar"))
    site = hive_site(tmp_path)
    assert f"jdbc:derby:;databaseName={tmp_path}/metastore_db;create=true" in site
    assert "<name>hive.async.log.enabled</name><value>false</value>" in site
    with pytest.raises(CatalogError, match=r"sluice-metastore.jar is missing: run `make sluice-jar`"):
        server_jars(tmp_path / "no-jars")
    (tmp_path / "jars" / "metastore").mkdir(parents=True)
    (tmp_path / "jars" / "metastore" / "sluice-metastore.jar").touch()
    with pytest.raises(CatalogError, match=r"the PostgreSQL JDBC driver is missing from .*/jars/catalog: run `make "
                                           r"jars`"):
        server_jars(tmp_path / "jars", {"url": "jdbc:postgresql://db:5432/metastore"})
    team = hive_site(tmp_path, {"url": "jdbc:postgresql://127.0.0.1:5432/metastore?a=1&b=2",
                                "driver": "org.postgresql.Driver", "user": "hive", "password": "p<w>"})
    assert "jdbc:postgresql://127.0.0.1:5432/metastore?a=1&amp;b=2" in team and "p&lt;w&gt;" in team


def test_the_folder_finds_a_pipeline_and_an_upstream_by_its_table_name_and_refuses_a_name_used_twice(lake):
    write_spec(lake.pipelines_dir, orders_spec(name="tn_bronze", sink={"path": "bronze/orders",
                                                                       "table": "bronze.orders"}))
    write_spec(lake.pipelines_dir, orders_spec(name="tn_auto", sink={"path": "silver/orders"}))
    catalog = PipelineCatalog(lake.pipelines_dir)
    assert catalog.resolve("bronze.orders", lake) == lake.pipelines_dir / "tn_bronze.yaml"
    auto = load_settings({**_env(lake), "SLUICE_TABLE_NAMES": "auto"})
    assert catalog.resolve("silver.orders", auto) == lake.pipelines_dir / "tn_auto.yaml"
    with pytest.raises(SpecError, match="no such spec file, and no pipeline of that name"):
        catalog.resolve("silver.orders", lake)  # names off: that table has none

    reader = make_spec({"name": "tn_silver", "source": {"format": "delta", "table": "Bronze.Orders"}})
    assert resolve_upstream(reader, lake).source.path == str(lake.lake_root / "bronze" / "orders")
    unknown = make_spec({"name": "tn_gold", "source": {"format": "delta", "table": "bronze.nope"}})
    assert resolve_upstream(unknown, lake).source.path is None  # left to the run: it asks the catalog
    with pytest.raises(SpecError, match=r"source.table: 'bronze.nope' is not resolved to its folder"):
        resolve_upstream(unknown, lake).source_path(lake)
    with pytest.raises(SpecError, match=r"exactly one of them"):
        make_spec({"name": "tn_two", "source": {"format": "delta", "table": "bronze.orders", "path": "x"}})

    write_spec(lake.pipelines_dir, orders_spec(name="tn_copy", sink={"path": "bronze/copy", "table": "BRONZE.orders"}))
    loaded = PipelineCatalog.load(lake.pipelines_dir)
    assert [e.problems for e in loaded.errors] == [[
        f"sink.table: 'bronze.orders' is also the table of {lake.pipelines_dir / 'tn_bronze.yaml'}; a name is one table: give this "
        "pipeline's table another name"]]
    assert sorted(s.name for s in loaded.specs.values()) == ["tn_auto", "tn_bronze"]


def _env(settings) -> dict[str, str]:
    return {"SLUICE_LAKE_ROOT": str(settings.lake_root), "SLUICE_CHECKPOINT_ROOT": str(settings.checkpoint_root),
            "SLUICE_PIPELINES": str(settings.pipelines_dir)}


def test_validate_and_backlog_of_a_spec_reading_a_table_only_the_catalog_knows_say_so_without_failing(lake, capsys):
    from sluice.operations.backlog import measure
    from sluice_cli.main import main

    path = write_spec(lake.pipelines_dir, {"name": "tn_outside", "source": {"format": "delta", "table": "fin.fx"},
                                           "sink": {"path": "silver/fx"}})
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    found = measure(resolve_upstream(make_spec({"name": "tn_outside", "source": {"format": "delta",
                                                                                 "table": "fin.fx"}}), lake), lake)
    assert found["source"] == "delta" and "source.table: 'fin.fx' is not resolved to its folder" in found["error"]
