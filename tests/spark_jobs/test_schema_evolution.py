"""Schema drift at the table, on real Spark and Delta (issue 26): a column added to ``source.schema`` (or by
``transform.sql``) is added to the table and gets the values earlier records kept in ``_rescued``; a widened
type widens the column; a narrowed, changed, removed or renamed column is refused before anything is
written -- for append, merge and complete sinks and a chained (Delta source) pipeline."""

from __future__ import annotations

import json

import pytest

from sluice.contract import run_job
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sinks import schema_evolution
from tests.helpers import delta_version, make_spec, tree_digest, write_lines, write_spec


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id=options.pop("run_id", "t"),
                                                      write_ledger=False, **options)).to_json()


def pipeline(schema: str, **overrides) -> dict:
    return {"name": "coupons", "source": {"format": "json", "path": "landing/coupons", "schema": schema},
            "sink": {"path": "bronze/coupons"}, **overrides}


def land(lake, name: str, *records: dict) -> None:
    write_lines(lake.lake_root / "landing" / "coupons" / name, [json.dumps(r) for r in records])


def table(spark, spec, lake):
    return spark.read.format("delta").load(spec.sink_path(lake))


def rows(spark, spec, lake) -> list[tuple]:
    return sorted(tuple(r) for r in table(spark, spec, lake).collect())


def types(spark, spec, lake) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in table(spark, spec, lake).schema.fields}


def commit_actions(spec, lake, version: int) -> list[str]:
    log = spec.sink_path(lake) + f"/_delta_log/{version:020d}.json"
    with open(log, encoding="utf-8") as f:
        return sorted({next(iter(json.loads(line))) for line in f})


# --- append ---------------------------------------------------------------------------------------

def test_a_column_added_to_the_schema_is_added_and_gets_the_rescued_values(spark, lake):
    # the steps: the undeclared field is rescued, then declared
    old = make_spec(pipeline("id BIGINT"))
    land(lake, "1.json", {"id": 1, "coupon": "A"}, {"id": 2}, {"id": 3, "coupon": "C", "qty": 5},
         {"id": 4, "qty": "many"})
    run(spark, old, lake)
    assert rows(spark, old, lake) == [(1, '{"coupon":"A"}'), (2, None), (3, '{"coupon":"C","qty":5}'),
                                      (4, '{"qty":"many"}')]

    new = make_spec(pipeline("id BIGINT, coupon STRING, qty INT"))
    land(lake, "2.json", {"id": 5, "coupon": "B", "qty": 1})
    before = delta_version(new.sink_path(lake))
    summary = run(spark, new, lake)

    assert summary["status"] == "succeeded" and summary["output_rows"] == 1
    assert summary["schema_change"] == {
        "table": new.sink_path(lake), "applied": True, "widened_columns": [],
        "added_columns": [{"column": "coupon", "type": "STRING"}, {"column": "qty", "type": "INT"}],
    }
    # the batch and the new columns are one commit; the promotion is the next one
    batch_version = summary["micro_batches"][0]["delta_version"]
    assert batch_version == before + 1 and "metaData" in commit_actions(new, lake, batch_version)
    assert summary["promoted_rescued"] == {"coupon": {"rows": 2, "kept_in_rescued": 0},
                                           "qty": {"rows": 1, "kept_in_rescued": 1}}
    assert summary["delta_version_after"] == batch_version + 1
    assert types(spark, new, lake) == {"id": "bigint", "_rescued": "string", "coupon": "string", "qty": "int"}
    assert sorted(tuple(r) for r in table(spark, new, lake).select("id", "coupon", "qty", "_rescued").collect()) == [
        (1, "A", None, None), (2, None, None, None), (3, "C", 5, None),
        (4, None, None, '{"qty":"many"}'),  # does not fit INT: kept where it was, nothing lost
        (5, "B", 1, None),
    ]

    again = run(spark, new, lake)  # nothing left to add or to promote
    assert (again["batches"], again.get("schema_change"), again.get("promoted_rescued")) == (0, None, None)
    assert again["delta_version_after"] == summary["delta_version_after"]


def test_a_run_without_new_data_changes_the_table_and_moves_the_rescued_values(spark, lake):
    old = make_spec(pipeline("id INT"))
    land(lake, "1.json", {"id": 1, "coupon": "A"})
    run(spark, old, lake)
    new = make_spec(pipeline("id BIGINT, coupon STRING"))

    idle = run(spark, new, lake)  # no batch to carry the change: metadata-only commits

    assert idle["batches"] == 0 and idle["schema_change"]["applied"] is True
    assert idle["promoted_rescued"] == {"coupon": {"rows": 1, "kept_in_rescued": 0}}
    assert types(spark, new, lake) == {"id": "bigint", "_rescued": "string", "coupon": "string"}
    assert rows(spark, new, lake) == [(1, None, "A")]


def test_a_promotion_interrupted_by_a_crash_is_done_by_the_next_run_once(spark, lake, monkeypatch):
    old = make_spec(pipeline("id BIGINT"))
    land(lake, "1.json", {"id": 1, "coupon": "A"})
    run(spark, old, lake)
    new = make_spec(pipeline("id BIGINT, coupon STRING"))
    land(lake, "2.json", {"id": 2, "coupon": "B"})
    real = schema_evolution.promote_rescued

    def crash(*args, **kwargs):
        raise RuntimeError("driver died before the promotion's commit")

    monkeypatch.setattr(schema_evolution, "promote_rescued", crash)
    with pytest.raises(RunFailed, match="driver died before the promotion's commit"):
        run(spark, new, lake)
    assert rows(spark, new, lake) == [(1, '{"coupon":"A"}', None), (2, None, "B")]  # the batch is committed

    monkeypatch.setattr(schema_evolution, "promote_rescued", real)
    after = run(spark, new, lake)
    assert (after["batches"], after.get("schema_change")) == (0, None)
    assert after["promoted_rescued"] == {"coupon": {"rows": 1, "kept_in_rescued": 0}}
    assert rows(spark, new, lake) == [(1, None, "A"), (2, None, "B")]
    assert run(spark, new, lake).get("promoted_rescued") is None  # done: not looked for again


def test_a_widened_type_widens_the_column(spark, lake):
    old = make_spec(pipeline("id INT, price FLOAT, amount DECIMAL(5,2)"))
    land(lake, "1.json", {"id": 1, "price": 1.5, "amount": 123.45})
    run(spark, old, lake)

    new = make_spec(pipeline("id BIGINT, price DOUBLE, amount DECIMAL(12,2)"))
    land(lake, "2.json", {"id": 2**40, "price": 0.1, "amount": 1234567890.12})
    summary = run(spark, new, lake)

    assert summary["schema_change"]["widened_columns"] == [
        {"column": "id", "from": "INT", "to": "BIGINT"}, {"column": "price", "from": "FLOAT", "to": "DOUBLE"},
        {"column": "amount", "from": "DECIMAL(5,2)", "to": "DECIMAL(12,2)"}]
    assert types(spark, new, lake) == {"id": "bigint", "price": "double", "amount": "decimal(12,2)",
                                       "_rescued": "string"}
    assert [(r.id, r.price, str(r.amount)) for r in table(spark, new, lake).orderBy("id").collect()] == [
        (1, 1.5, "123.45"), (2**40, 0.1, "1234567890.12")]


REFUSALS = {
    "narrowed": ("id INT, customer STRING, amount DOUBLE",
                 r"column id is BIGINT in the table and INT in the output \(narrowed\)"),
    "changed": ("id BIGINT, customer STRING, amount STRING",
                r"column amount is DOUBLE in the table and STRING in the output \(changed to another type\)"),
    "removed": ("id BIGINT, amount DOUBLE",
                r"column customer \(STRING\) is in the table but not in the output \(removed\)"),
    "renamed": ("id BIGINT, client STRING, amount DOUBLE",
                r"column customer \(STRING\) is in the table but not in the output \(removed, or renamed to client\)"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_narrowed_changed_removed_or_renamed_column_is_refused_before_anything_is_written(spark, lake, case):
    old = make_spec(pipeline("id BIGINT, customer STRING, amount DOUBLE"))
    land(lake, "1.json", {"id": 1, "customer": "ann", "amount": 2.5})
    run(spark, old, lake)
    schema, problem = REFUSALS[case]
    new = make_spec(pipeline(schema))
    land(lake, "2.json", {"id": 2, "customer": "bob", "client": "bob", "amount": 3.5})
    checkpoint = tree_digest(lake.checkpoint_root / "coupons")
    version = delta_version(new.sink_path(lake))

    for dry_run in (True, False):
        with pytest.raises(RunFailed, match=rf"^refused: the output of coupons does not fit its table .*: {problem}.* "
                                            r"Nothing was written\. Options: .* put the new values in a new column "
                                            r"instead; or run once with --reset-checkpoint \(Airflow: trigger with "
                                            r"mode=reset\).*; or point sink\.path at a new table\.$"):
            run(spark, new, lake, dry_run=dry_run)
    assert delta_version(new.sink_path(lake)) == version
    assert tree_digest(lake.checkpoint_root / "coupons") == checkpoint

    reset = run(spark, new, lake, reset=True)  # one of the options: the table rebuilt with the new schema
    assert reset["status"] == "succeeded" and table(spark, new, lake).count() == 2


def test_a_dry_run_shows_the_change_and_leaves_the_table_as_it_was(spark, lake):
    old = make_spec(pipeline("id BIGINT"))
    land(lake, "1.json", {"id": 1, "coupon": "A"})
    run(spark, old, lake)
    new = make_spec(pipeline("id BIGINT, coupon STRING"))
    land(lake, "2.json", {"id": 2, "coupon": "B"})
    version = delta_version(new.sink_path(lake))

    dry = run(spark, new, lake, dry_run=True)

    assert dry["schema_change"]["added_columns"] == [{"column": "coupon", "type": "STRING"}]
    assert dry["schema_change"]["applied"] is True and dry["promoted_rescued"] == {
        "coupon": {"rows": 1, "kept_in_rescued": 0}}
    assert delta_version(new.sink_path(lake)) == version and "coupon" not in table(spark, new, lake).columns
    real = run(spark, new, lake)
    assert (real["schema_change"], real["promoted_rescued"]) == (dry["schema_change"], dry["promoted_rescued"])
    assert rows(spark, new, lake) == [(1, None, "A"), (2, None, "B")]


def test_validate_shows_the_change_the_next_run_makes_and_fails_on_one_it_refuses(spark, lake, capsys):
    from sluice_cli.main import main

    old = make_spec(pipeline("id INT, customer STRING"))
    land(lake, "1.json", {"id": 1, "customer": "ann", "coupon": "A"})
    run(spark, old, lake)
    table_path = old.sink_path(lake)

    evolving = write_spec(lake.pipelines_dir, pipeline("id BIGINT, customer STRING, coupon STRING"))
    assert main(["validate", str(evolving)]) == 0
    assert capsys.readouterr().out == (f"ok: {evolving} (pipeline coupons)\n"
                                       f"schema: {evolving}: table {table_path}: the next run adds column(s) coupon "
                                       "STRING; widens id INT -> BIGINT\n")

    refused = write_spec(lake.pipelines_dir, pipeline("id BIGINT, client STRING"))
    assert main(["validate", str(refused)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"refused: {refused}: the next run would be refused: the output of coupons does not fit its "
                          f"table {table_path}: column customer (STRING) is in the table but not in the output "
                          "(removed, or renamed to client)")
    assert "Options: keep the column as it was" in err


def test_a_column_added_by_the_transform_sql_is_added(spark, lake):
    old = make_spec(pipeline("id BIGINT, amount DOUBLE", transform={"sql": "SELECT id, amount FROM source"}))
    land(lake, "1.json", {"id": 1, "amount": 2.0})
    run(spark, old, lake)
    new = make_spec(pipeline("id BIGINT, amount DOUBLE",
                             transform={"sql": "SELECT id, amount, amount * 2 AS doubled FROM source"}))
    land(lake, "2.json", {"id": 2, "amount": 3.0})
    summary = run(spark, new, lake)
    assert summary["schema_change"]["added_columns"] == [{"column": "doubled", "type": "DOUBLE"}]
    assert rows(spark, new, lake) == [(1, 2.0, None), (2, 3.0, 6.0)]


# --- merge and complete sinks ---------------------------------------------------------------------

def test_a_merge_sink_adds_and_widens_columns_and_refuses_a_narrowed_one(spark, lake):
    merge = {"path": "silver/coupons", "mode": "merge", "keys": ["id"]}
    old = make_spec(pipeline("id BIGINT, qty INT", sink=merge))
    land(lake, "1.json", {"id": 1, "qty": 1, "coupon": "A"}, {"id": 2, "qty": 2})
    run(spark, old, lake)

    new = make_spec(pipeline("id BIGINT, qty BIGINT, coupon STRING", sink=merge))
    land(lake, "2.json", {"id": 2, "qty": 2**40, "coupon": "B"}, {"id": 3, "qty": 3})
    summary = run(spark, new, lake)

    assert summary["schema_change"] == {
        "table": new.sink_path(lake), "applied": True,
        "added_columns": [{"column": "coupon", "type": "STRING"}],
        "widened_columns": [{"column": "qty", "from": "INT", "to": "BIGINT"}],
    }
    assert summary["micro_batches"][0]["merge"] == {"inserted": 1, "updated": 1, "deleted": 0}
    assert summary["promoted_rescued"] == {"coupon": {"rows": 1, "kept_in_rescued": 0}}
    assert types(spark, new, lake) == {"id": "bigint", "qty": "bigint", "_rescued": "string", "coupon": "string"}
    assert rows(spark, new, lake) == [(1, 1, None, "A"), (2, 2**40, None, "B"), (3, 3, None, None)]

    narrowed = make_spec(pipeline("id BIGINT, qty INT, coupon STRING", sink=merge))
    land(lake, "3.json", {"id": 4, "qty": 4})
    with pytest.raises(RunFailed, match=r"^refused: .*column qty is BIGINT in the table and INT in the output "
                                        r"\(narrowed\)"):
        run(spark, narrowed, lake)


COUNTS = "SELECT customer, count(*) AS orders, max(qty) AS top FROM source GROUP BY customer"


def test_a_complete_sink_refuses_a_narrowed_column_and_a_widened_one_its_state_holds(spark, lake):
    # a complete sink's columns are its aggregation's keys and results, kept in the checkpoint's state: a new
    # output column is a new aggregation (the spec guard refuses it), a widened one a new state type (Spark
    # refuses it); a column the aggregation does not read changes nothing
    complete = {"path": "gold/coupons", "mode": "complete"}
    old = make_spec(pipeline("customer STRING, qty INT", sink=complete, transform={"sql": COUNTS}))
    land(lake, "1.json", {"customer": "ann", "qty": 1}, {"customer": "ann", "qty": 4})
    run(spark, old, lake)
    assert rows(spark, old, lake) == [("ann", 2, 4)]
    version = delta_version(old.sink_path(lake))

    narrowed = make_spec(pipeline("customer STRING, qty SMALLINT", sink=complete, transform={"sql": COUNTS}))
    land(lake, "2.json", {"customer": "bob", "qty": 2})
    with pytest.raises(RunFailed, match=r"^refused: .*column top is INT in the table and SMALLINT in the output "
                                        r"\(narrowed\)"):
        run(spark, narrowed, lake)

    widened = make_spec(pipeline("customer STRING, qty BIGINT", sink=complete, transform={"sql": COUNTS}))
    with pytest.raises(RunFailed, match=r"STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE.* -- the state of coupons's "
                                        r"stateful query .* Nothing was written\. Options: revert the type change; "
                                        r"or run once with --reset-checkpoint"):
        run(spark, widened, lake)
    assert delta_version(old.sink_path(lake)) == version

    more = COUNTS.replace("max(qty) AS top", "max(qty) AS top, min(qty) AS low")
    with pytest.raises(RunFailed, match=r"^refused: the spec of coupons changed in a way its checkpoint .* cannot "
                                        r"resume from: the stateful query \(aggregation"):
        run(spark, make_spec(pipeline("customer STRING, qty INT", sink=complete, transform={"sql": more})), lake)

    added = make_spec(pipeline("customer STRING, qty INT, coupon STRING", sink=complete, transform={"sql": COUNTS}))
    summary = run(spark, added, lake)
    assert summary.get("schema_change") is None and rows(spark, added, lake) == [("ann", 2, 4), ("bob", 1, 2)]

    land(lake, "3.json", {"customer": "bob", "qty": 2**40})
    reset = run(spark, widened, lake, reset=True)  # the option: state and table rebuilt with the new types
    assert reset["status"] == "succeeded" and types(spark, widened, lake)["top"] == "bigint"
    assert rows(spark, widened, lake) == [("ann", 2, 4), ("bob", 2, 2**40)]


# --- a chained pipeline ---------------------------------------------------------------------------

def test_a_delta_source_pipeline_takes_the_columns_its_upstream_gained(spark, lake):
    bronze = make_spec(pipeline("id BIGINT, qty INT"))
    silver = make_spec({"name": "silver", "source": {"format": "delta", "pipeline": "coupons"}})
    write_spec(lake.pipelines_dir, pipeline("id BIGINT, qty INT"))
    land(lake, "1.json", {"id": 1, "qty": 1, "coupon": "A"}, {"id": 2, "qty": 2})
    run(spark, bronze, lake)
    run(spark, silver, lake)
    assert rows(spark, silver, lake) == [(1, 1, '{"coupon":"A"}'), (2, 2, None)]

    bronze = make_spec(pipeline("id BIGINT, qty BIGINT, coupon STRING"))  # the upstream gains and widens
    land(lake, "2.json", {"id": 3, "qty": 2**40, "coupon": "C"})
    assert run(spark, bronze, lake)["promoted_rescued"] == {"coupon": {"rows": 1, "kept_in_rescued": 0}}
    summary = run(spark, silver, lake)

    # the upstream's promotion commit changed rows, which Delta's streaming source stops at: skipped, and the
    # same promotion done in this table
    assert summary["status"] == "succeeded" and summary["output_rows"] == 1
    assert summary["promoted_rescued"] == {"coupon": {"rows": 1, "kept_in_rescued": 0}}
    assert summary["schema_change"]["added_columns"] == [{"column": "coupon", "type": "STRING"}]
    assert summary["schema_change"]["widened_columns"] == [{"column": "qty", "from": "INT", "to": "BIGINT"}]
    assert types(spark, silver, lake) == types(spark, bronze, lake)
    assert rows(spark, silver, lake) == rows(spark, bronze, lake) == [(1, 1, None, "A"), (2, 2, None, None),
                                                                      (3, 2**40, None, "C")]

    again = run(spark, silver, lake)
    assert (again["batches"], again.get("promoted_rescued")) == (0, None)


def test_an_upstream_change_that_is_not_a_promotion_rebuilds_the_downstream_table_whole(spark, lake):
    bronze = make_spec(pipeline("id BIGINT"))
    silver = make_spec({"name": "silver", "source": {"format": "delta", "pipeline": "coupons"}})
    write_spec(lake.pipelines_dir, pipeline("id BIGINT"))
    land(lake, "1.json", {"id": 1, "coupon": "A"}, {"id": 2})
    run(spark, bronze, lake)
    run(spark, silver, lake)
    bronze = make_spec(pipeline("id BIGINT, coupon STRING"))
    land(lake, "2.json", {"id": 3, "coupon": "C"})
    assert run(spark, bronze, lake)["promoted_rescued"]["coupon"]["rows"] == 1
    # a promotion and a DELETE in the range: skipping change commits would skip the DELETE silently
    spark.sql(f"DELETE FROM delta.`{bronze.sink_path(lake)}` WHERE id = 2")
    summary = run(spark, silver, lake)
    assert (summary["upstream_changes"]["action"], [c["kind"] for c in summary["upstream_changes"]["changes"]]) == (
        "reset", ["promotion", "other"])
    table = spark.read.format("delta").load(silver.sink_path(lake))
    assert sorted((r.id, r.coupon) for r in table.collect()) == [(1, "A"), (3, "C")]
