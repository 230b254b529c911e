"""Tables by name (sink.table): registered in a real Hive metastore after the first commit, left alone by the
runs after it (a schema change or a reset writes nothing to the catalog), moved with the pipeline's folder,
refused when another table holds the name; a catalog that does not answer fails the run after its data is
committed and the next run registers; two pipelines register at once (on a local catalog that the first of
them starts); a Delta source reads an upstream table by its name (from the folder, or from the catalog).

Each on both catalogs: the local one (embedded Derby) and the team's (the same server on PostgreSQL, as
`make stack` and docker-compose run it)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from devservices.kafka_broker import free_port
from sluice.operations.catalog import LocalMetastore, ensure_catalog, stop_local
from sluice.settings import load_settings
from spark_jobs.sinks import names
from tests.helpers import ORDERS_SCHEMA, orders_spec, run_here, write_orders, write_spec

TEAM = pytest.param("team", marks=pytest.mark.slow)  # PostgreSQL and a metastore on it: not in make test-fast


@pytest.fixture(params=["local", TEAM])
def catalog(request):
    """The metastore of the test: the local one (Derby) or the team's (PostgreSQL)."""
    return request.getfixturevalue("metastore" if request.param == "local" else "team_metastore")


@pytest.fixture
def named(lake, catalog, monkeypatch):
    monkeypatch.setenv("SLUICE_CATALOG_URI", catalog.uri)
    return load_settings()


def entry(spark, uri: str, name: str):
    """The metastore's own record of ``name`` (None: not registered), read with Hive's client."""
    client = names.connect(spark, uri)
    try:
        schema, table = name.split(".")
        return names._get_table(client, schema, table)
    finally:
        client.close()


def registered(spark, uri: str, name: str) -> tuple[str, str, str] | None:
    found = entry(spark, uri, name)
    if found is None:
        return None
    params = found.getParameters()
    return (found.getSd().getSerdeInfo().getParameters().get("path"), params.get("spark.sql.sources.provider"),
            params.get("sluice.pipeline"))


def test_a_name_is_registered_after_the_first_commit_and_written_again_only_when_its_folder_moves(spark, named):
    uri, lake_root = named.catalog_uri, named.lake_root
    spec = orders_spec(name="nm_orders", sink={"path": "bronze/nm_orders", "table": "nm_bronze.orders"})
    path = write_spec(named.pipelines_dir, spec)
    write_orders(lake_root / "landing" / "orders", "a.json", range(0, 10))
    (lake_root / "landing" / "orders" / "bad.json").write_text('{"id": 99, "amount": "x"\n')

    first = run_here(spark, named, path, run_id="first")

    assert first["status"] == "succeeded", first["error"]
    assert first["catalog"] == {"uri": uri, "table": "nm_bronze.orders", "action": "created",
                                "quarantine": {"table": "nm_bronze.orders_quarantine", "action": "created"}}
    table_folder = f"file:{lake_root}/bronze/nm_orders"
    assert registered(spark, uri, "nm_bronze.orders") == (table_folder, "delta", "nm_orders")
    assert registered(spark, uri, "nm_bronze.orders_quarantine") == (
        f"file:{lake_root}/_quarantine/nm_orders", "delta", "nm_orders")
    created = entry(spark, uri, "nm_bronze.orders").getParameters().get("transient_lastDdlTime")

    # a column added to the schema (the table evolves), then a reset: the catalog holds no columns, nothing
    # of it changes, and it is not written
    spec["source"]["schema"] = ORDERS_SCHEMA + ", note STRING"
    write_spec(named.pipelines_dir, spec)
    write_orders(lake_root / "landing" / "orders", "b.json", range(10, 15))
    evolved = run_here(spark, named, path, run_id="evolved")
    assert evolved["status"] == "succeeded", evolved["error"]
    assert (evolved["schema_change"]["added_columns"], evolved["schema_change"]["applied"]) == (
        [{"column": "note", "type": "STRING"}], True), evolved["schema_change"]
    assert evolved["catalog"]["action"] == "unchanged" and evolved["catalog"]["quarantine"]["action"] == "unchanged"
    reset = run_here(spark, named, path, run_id="reset", reset=True)
    assert reset["status"] == "succeeded", reset["error"]
    assert reset["catalog"]["action"] == "unchanged"
    assert entry(spark, uri, "nm_bronze.orders").getParameters().get("transient_lastDdlTime") == created

    # the pipeline's table moves to another folder: its name follows it
    spec["sink"]["path"] = "bronze/nm_orders_v2"
    write_spec(named.pipelines_dir, spec)
    moved = run_here(spark, named, path, run_id="moved", reset=True)
    assert moved["status"] == "succeeded", moved["error"]
    assert moved["catalog"]["action"] == "moved"
    assert registered(spark, uri, "nm_bronze.orders") == (f"{table_folder}_v2", "delta", "nm_orders")

    # another pipeline (another team's folder) asking for the same name: refused after its commit, named
    other_folder = Path(str(named.pipelines_dir) + "_other")
    other_folder.mkdir()
    other = write_spec(other_folder, orders_spec(name="nm_other", sink={"path": "bronze/nm_other",
                                                                        "table": "NM_BRONZE.Orders"}))
    taken = run_here(spark, named, other, run_id="taken")
    assert taken["status"] == "failed" and taken["output_rows"] == 15
    assert taken["error"].startswith(f"the catalog name nm_bronze.orders is registered for {table_folder}_v2 "
                                     "(pipeline nm_orders), not for this pipeline's table "), taken["error"]
    assert "The data of this run is committed" in taken["error"]
    assert taken["catalog"]["error"] == taken["error"]


def test_a_catalog_that_does_not_answer_fails_the_run_after_its_commit_and_the_next_run_registers(
        spark, lake, catalog, monkeypatch):
    dead = f"thrift://127.0.0.1:{free_port()}"
    monkeypatch.setenv("SLUICE_CATALOG_URI", dead)
    down = load_settings()
    path = write_spec(down.pipelines_dir, orders_spec(name="nm_down", sink={"table": "nm_down.orders"}))
    write_orders(down.lake_root / "landing" / "orders", "a.json", range(0, 7))

    failed = run_here(spark, down, path, run_id="down")

    assert failed["status"] == "failed" and failed["output_rows"] == 7 and failed["delta_version_after"] == 0
    assert failed["error"].startswith(
        f"the catalog (Hive metastore {dead}) does not answer: Could not connect to meta store using any of the URIs "
        "provided. Most recent failure: org.apache.thrift.transport.TTransportException: java.net.ConnectException: "
        "Connection refused. Start it (`sluice catalog up` for the local one; SLUICE_CATALOG_URI names another) and "
        "run again: "), failed["error"]
    assert failed["error"].endswith("the data of this run is committed, and the next run registers the table")
    assert failed["catalog"] == {"uri": dead, "table": "nm_down.orders", "error": failed["error"]}

    monkeypatch.setenv("SLUICE_CATALOG_URI", catalog.uri)
    up = load_settings()
    after = run_here(spark, up, path, run_id="up")
    assert after["status"] == "succeeded", after["error"]
    assert (after["input_rows"], after["catalog"]["action"]) == (0, "created")
    assert "quarantine" not in after["catalog"]  # no bad record, no quarantine table: nothing to name
    assert registered(spark, catalog.uri, "nm_down.orders")[0] == f"file:{up.lake_root}/nm_down"


@pytest.mark.parametrize("where", ["local", TEAM])
def test_two_pipelines_register_at_once_on_a_fresh_schema_and_the_local_catalog_is_started_once(
        spark, lake, monkeypatch, tmp_path, request, where):
    if where == "local":  # no catalog named: the local one, which the first of the two starts
        monkeypatch.delenv("SLUICE_CATALOG_URI", raising=False)
        monkeypatch.setenv("SLUICE_CATALOG_HOME", str(tmp_path / "catalog"))
        monkeypatch.setenv("SLUICE_CATALOG_PORT", str(free_port()))
    else:
        monkeypatch.setenv("SLUICE_CATALOG_URI", request.getfixturevalue("team_metastore").uri)
    settings = load_settings()
    specs = []
    for name in ("nm_one", "nm_two"):
        path = write_spec(settings.pipelines_dir, orders_spec(name=name, sink={"path": f"bronze/{name}"},
                                                              source={"format": "json", "path": f"landing/{name}",
                                                                      "schema": ORDERS_SCHEMA}))
        write_orders(settings.lake_root / "landing" / name, "a.json", range(0, 3))
        assert "catalog" not in run_here(spark, settings, path, run_id="set-up")  # no name: no catalog
        specs.append(path)
    from sluice.spec import load_spec

    results, errors = {}, []

    def register(path: Path) -> None:
        spec = load_spec(path)
        spec = spec.model_copy(update={"sink": spec.sink.model_copy(update={"table": f"nm_fleet.{spec.name}"})})
        try:
            results[spec.name] = names.register_tables(spark, spec, settings, table=spec.sink_path(settings),
                                                       quarantine=spec.quarantine_table_path(settings))
        except Exception as err:  # noqa: BLE001 - shown by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=register, args=(p,)) for p in specs]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        assert not errors, errors
        assert {n: (r["table"], r["action"]) for n, r in results.items()} == {
            "nm_one": ("nm_fleet.nm_one", "created"), "nm_two": ("nm_fleet.nm_two", "created")}
        if where == "local":
            server = LocalMetastore.load(settings.catalog_home)
            assert server is not None and server.running() and server.port == settings.catalog_port
            assert ensure_catalog(settings) == server.uri  # started once: the second found it answering
        for name in ("nm_one", "nm_two"):
            assert registered(spark, settings.metastore_uri, f"nm_fleet.{name}")[0] == (
                f"file:{settings.lake_root}/bronze/{name}")
    finally:
        server = LocalMetastore.load(settings.catalog_home) if where == "local" else None
        if server is not None:
            stop_local(server)


def test_a_delta_source_reads_its_upstream_by_name_from_the_folder_or_from_the_catalog(spark, named, tmp_path,
                                                                                     monkeypatch):
    lake_root = named.lake_root
    write_spec(named.pipelines_dir, orders_spec(name="nm_src", sink={"path": "bronze/nm_src", "table": "nm_up.src"}))
    write_orders(lake_root / "landing" / "orders", "a.json", range(0, 6))
    silver = {"name": "nm_silver", "source": {"format": "delta", "table": "nm_up.src"},
              "sink": {"path": "silver/nm_silver"}}
    silver_path = write_spec(named.pipelines_dir, silver)
    assert run_here(spark, named, named.pipelines_dir / "nm_src.yaml", run_id="bronze")["status"] == "succeeded"

    from_folder = run_here(spark, named, silver_path, run_id="silver")

    assert from_folder["status"] == "succeeded", from_folder["error"]
    assert from_folder["output_rows"] == 6

    # a folder of specs that does not hold the upstream's: the name is looked up in the catalog
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("SLUICE_PIPELINES", str(elsewhere))
    settings = load_settings()
    gold_path = write_spec(elsewhere, {**silver, "name": "nm_gold", "sink": {"path": "gold/nm_gold"}})
    from_catalog = run_here(spark, settings, gold_path, run_id="gold")
    assert from_catalog["status"] == "succeeded", from_catalog["error"]
    assert from_catalog["output_rows"] == 6

    unknown = write_spec(elsewhere, {**silver, "name": "nm_unknown", "source": {"format": "delta", "table": "nm_up.nope"},
                                     "sink": {"path": "gold/nm_unknown"}})
    refused = run_here(spark, settings, unknown, run_id="unknown")
    assert refused["status"] == "failed" and refused["batches"] == 0
    assert (f"source.table: 'nm_up.nope' is neither the sink.table of a pipeline in {elsewhere} nor registered in "
            f"the catalog ({settings.catalog_uri}): run the pipeline that writes it first") in refused["error"]
