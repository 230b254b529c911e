"""What a run would change in its table's schema, and whether Delta can do it without losing data.

The run's output (``source.schema``, or what ``transform.sql`` makes of it) is compared, column by column,
with the sink table's schema before Spark writes anything:

* a column in the output and not in the table is **added** (Delta schema evolution, ``mergeSchema``, in the
  commit of the batch that first carries it; the table's older rows read it as null);
* a column whose type grows (``INT -> BIGINT``, ``FLOAT -> DOUBLE``, ``DECIMAL(10,2) -> DECIMAL(12,2)``) is
  **widened** (Delta type widening, table property ``delta.enableTypeWidening``; old values are not
  rewritten, Delta reads them as the wider type):
  https://docs.delta.io/latest/delta-type-widening.html
* a column that is no longer in the output (removed, or renamed), and a type that narrows or changes kind,
  are **refused**: Delta would fill the column with nulls from now on, or fail mid-run; the message names the
  column, the old and new type, and the options.

Pure Python over Spark's JSON schema (what ``StructType.jsonValue()`` gives and the Delta log keeps) and
Spark DDL: ``sluice validate`` uses it without a JVM, the Spark side before its run writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from sluice.spec.ddl import nested, parse_ddl_schema, split_top_level, struct_fields

# A type: a primitive's name ("bigint", "decimal(10,2)"), or ("array", element), ("map", key, value),
# ("struct", ((name, type), ...)).
Type = Union[str, tuple]

_JSON_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}
_DDL_NAMES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "real": "float",
              "dec": "decimal", "numeric": "decimal", "timestamp_ltz": "timestamp", "bool": "boolean"}
_DECIMAL_RE = re.compile(r"^decimal\((\d+),(\d+)\)$")
# Delta type widening: every change here can be applied to a table without rewriting it (Delta 4.x),
# verified on Delta 4.4 with an append and a MERGE under schema evolution
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_WIDER = {(a, b) for i, a in enumerate(_INTEGRAL) for b in _INTEGRAL[i + 1:]} | {
    ("float", "double"), ("tinyint", "double"), ("smallint", "double"), ("int", "double"),
}


def from_json(value: Any) -> Type:
    """A type from Spark's / Delta's JSON schema (``"long"``, ``{"type": "struct", "fields": [...]}``)."""
    if isinstance(value, str):
        name = value.replace(" ", "")
        return _JSON_NAMES.get(name, name)
    kind = value["type"]
    if kind == "struct":
        return ("struct", tuple((f["name"], from_json(f["type"])) for f in value["fields"]))
    if kind == "array":
        return ("array", from_json(value["elementType"]))
    if kind == "map":
        return ("map", from_json(value["keyType"]), from_json(value["valueType"]))
    return str(kind)


def from_ddl_type(text: str) -> Type:
    """A type from Spark DDL (``BIGINT``, ``DECIMAL(12, 2)``, ``ARRAY<STRUCT<a: INT>>``)."""
    lower = text.strip().lower()
    found = nested(text)
    if found:
        kind, inner = found
        if kind == "array":
            return ("array", from_ddl_type(inner))
        if kind == "map":
            key, value = split_top_level(inner)
            return ("map", from_ddl_type(key), from_ddl_type(value))
        return ("struct", tuple((name.strip().strip("`"),
                                 from_ddl_type(re.sub(r"(?i)\s+(not\s+null|comment\s+'.*')\s*$", "", rest.strip())))
                                for name, rest in struct_fields(inner)))
    name = re.sub(r"\s+", "", lower)
    base = name.split("(")[0]
    if base in ("varchar", "char"):
        return "string"
    base = _DDL_NAMES.get(base, base)
    if base == "decimal":
        return name.replace(name.split("(")[0], "decimal") if "(" in name else "decimal(10,0)"
    return base


def from_ddl(ddl: str) -> Type:
    """The struct of a DDL schema (``id BIGINT, ts TIMESTAMP``)."""
    return ("struct", tuple((name, from_ddl_type(kind)) for name, kind in parse_ddl_schema(ddl)))


def text(t: Type) -> str:
    """The type as DDL: ``BIGINT``, ``DECIMAL(12,2)``, ``STRUCT<a: INT>``."""
    if isinstance(t, str):
        return t.upper()
    if t[0] == "array":
        return f"ARRAY<{text(t[1])}>"
    if t[0] == "map":
        return f"MAP<{text(t[1])}, {text(t[2])}>"
    return "STRUCT<" + ", ".join(f"{name}: {text(kind)}" for name, kind in t[1]) + ">"


def widens(old: str, new: str) -> bool:
    """Whether Delta's type widening turns a column of type ``old`` into ``new`` without losing a value."""
    if (old, new) in _WIDER:
        return True
    a, b = _DECIMAL_RE.match(old), _DECIMAL_RE.match(new)
    if a and b:
        (p1, s1), (p2, s2) = (int(x) for x in a.groups()), (int(x) for x in b.groups())
        return (p2, s2) != (p1, s1) and s2 >= s1 and p2 - s2 >= p1 - s1
    return False


@dataclass(frozen=True)
class Refusal:
    column: str
    old: str | None
    """The table's type (None: not in the table)."""
    new: str | None
    """The output's type (None: no longer in the output)."""
    why: str


@dataclass
class SchemaChange:
    """What the next run does to the table's schema."""

    added: list[tuple[str, str]] = field(default_factory=list)
    """``(column, type)``: new columns (``a.b`` for a field added inside a struct)."""
    widened: list[tuple[str, str, str]] = field(default_factory=list)
    """``(column, old type, new type)``."""
    refused: list[Refusal] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.widened or self.refused)

    def summary(self) -> dict[str, Any]:
        """The run summary's ``schema_change``."""
        return {
            "added_columns": [{"column": c, "type": t} for c, t in self.added],
            "widened_columns": [{"column": c, "from": a, "to": b} for c, a, b in self.widened],
        }

    def describe(self) -> str:
        """One line: ``adds column coupon STRING; widens qty INT -> BIGINT``."""
        parts = []
        if self.added:
            parts.append("adds column(s) " + ", ".join(f"{c} {t}" for c, t in self.added))
        if self.widened:
            parts.append("widens " + ", ".join(f"{c} {a} -> {b}" for c, a, b in self.widened))
        return "; ".join(parts) or "no change"


def compare(table: Type, output: Type, *, keep_extra_columns: bool = False) -> SchemaChange:
    """How writing rows of ``output`` changes a table of ``table`` (both structs).

    ``keep_extra_columns``: columns the table has beyond the output are expected (``schema_evolution:
    add_columns`` adds the record's new fields batch by batch), not a removed column."""
    change = SchemaChange()
    _compare_struct(table, output, "", change, keep_extra_columns)
    for i, refusal in enumerate(change.refused):
        # a rename is a column removed and one added: name the candidates
        parent = refusal.column.rpartition(".")[0]
        same_type = [c for c, t in change.added
                     if refusal.new is None and t == refusal.old and c.rpartition(".")[0] == parent]
        if same_type:
            change.refused[i] = Refusal(refusal.column, refusal.old, None,
                                        f"removed, or renamed to {' or '.join(same_type)}")
    return change


def _compare_struct(table: Type, output: Type, prefix: str, change: SchemaChange, keep_extra: bool) -> None:
    have = {name.lower(): (name, kind) for name, kind in table[1]}
    want = {name.lower(): (name, kind) for name, kind in output[1]}
    for key, (name, kind) in want.items():
        if key not in have:
            change.added.append((prefix + name, text(kind)))
        else:
            _compare_type(have[key][1], kind, prefix + name, change, keep_extra)
    if not keep_extra or prefix:
        for key, (name, kind) in have.items():
            if key not in want:
                change.refused.append(Refusal(prefix + name, text(kind), None, "removed"))


def _compare_type(old: Type, new: Type, column: str, change: SchemaChange, keep_extra: bool) -> None:
    if old == new:
        return
    if isinstance(old, str) and isinstance(new, str):
        if widens(old, new):
            change.widened.append((column, text(old), text(new)))
        elif widens(new, old):
            change.refused.append(Refusal(column, text(old), text(new), "narrowed"))
        else:
            change.refused.append(Refusal(column, text(old), text(new), "changed to another type"))
        return
    if isinstance(old, tuple) and isinstance(new, tuple) and old[0] == new[0]:
        if old[0] == "struct":
            _compare_struct(old, new, column + ".", change, keep_extra)
        elif old[0] == "array":
            _compare_type(old[1], new[1], column + ".element", change, keep_extra)
        else:
            _compare_type(old[1], new[1], column + ".key", change, keep_extra)
            _compare_type(old[2], new[2], column + ".value", change, keep_extra)
        return
    change.refused.append(Refusal(column, text(old), text(new), "changed to another type"))


def refusal_message(pipeline: str, table: str, change: SchemaChange) -> str:
    """Why the run is refused, and what to do: each column with its old and new type, then the options."""
    problems = []
    for r in change.refused:
        if r.new is None:
            problems.append(f"column {r.column} ({r.old}) is in the table but not in the output ({r.why}): "
                            "Delta would write nulls into it from now on")
        else:
            problems.append(f"column {r.column} is {r.old} in the table and {r.new} in the output ({r.why}): "
                            "Delta cannot change it without rewriting the table")
    return (
        f"the output of {pipeline} does not fit its table {table}: " + "; ".join(problems)
        + ". Nothing was written. Options: keep the column as it was (source.schema, or a CAST in "
        "transform.sql) and put the new values in a new column instead; or run once with --reset-checkpoint "
        "(Airflow: trigger with mode=reset) to rebuild the table from the source with the new schema (the old "
        "versions stay in the Delta history); or point sink.path at a new table."
    )


# --- without Spark: what `sluice validate` can tell ------------------------------------------------

_KAFKA_COLUMNS = (("key", "string"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
                  ("timestamp", "timestamp"))


def output_without_spark(spec, settings) -> Type | None:
    """The columns a run of ``spec`` writes, when they follow from the spec alone: no ``transform.sql`` (whose
    columns only Spark's analyzer knows), no Avro value (spark-avro's). None otherwise, or when a Delta
    source's table does not exist."""
    from sluice.spec import (
        RESCUED_COLUMN,
        SCD2_END,
        SCD2_START,
        DeltaSource,
        KafkaSource,
    )
    from sluice.storage.delta_log import log_state

    if spec.transform is not None and spec.transform.sql:
        return None
    source = spec.source
    if isinstance(source, DeltaSource):
        from sluice.spec.catalog import resolve_upstream

        resolved = resolve_upstream(spec, settings)
        if resolved.source.table and not resolved.source.path:  # a table only the catalog knows: the run's to see
            return None
        upstream = log_state(resolved.source_path(settings))
        return from_json(upstream["schema"]) if upstream is not None else None
    if isinstance(source, KafkaSource):
        if source.value.format == "avro":  # the columns are spark-avro's conversion of the Avro schema
            return None
        if source.infers_schema():  # to be inferred by the first run: only Spark knows it
            return None
        value = (from_ddl(source.value.schema_)[1] if source.value.format == "json" else (("value", "string"),))
        columns = (*value, *_KAFKA_COLUMNS)
    elif source.format == "text":
        columns = (("value", "string"),)
    elif source.schema_ is None:  # to be inferred by the first run: only Spark knows it
        return None
    else:
        columns = from_ddl(source.schema_)[1]
    if spec.rescues_fields() and spec.schema_evolution != "add_columns":
        columns = (*columns, (RESCUED_COLUMN, "string"))
    sequence = [kind for name, kind in columns if name == spec.sink.sequence_by]
    if spec.sink.mode == "scd2" and sequence:  # the history table's two more columns
        columns = (*columns, (SCD2_START, sequence[0]), (SCD2_END, sequence[0]))
    return ("struct", tuple(columns))


def next_change(spec, settings) -> tuple[SchemaChange | None, str]:
    """What the next run of ``spec`` would do to its table's schema, as far as it is known without Spark, and
    a line saying it (for ``sluice validate``). None when there is nothing to compare: no table yet, or
    columns only Spark knows (``sluice run --dry-run`` shows those)."""
    from sluice.schema.stored import stored_spec
    from sluice.storage.delta_log import log_state

    spec = stored_spec(spec, spec.checkpoint_path(settings))[0]  # an inferred schema: the version in use
    table = spec.sink_path(settings)
    state = log_state(table)
    output = output_without_spark(spec, settings) if state is not None else None
    if output is None:
        return None, ""
    change = compare(from_json(state["schema"]), output, keep_extra_columns=spec.schema_evolution == "add_columns")
    if change.refused:
        return change, refusal_message(spec.name, table, change).replace(". Nothing was written.", ".", 1)
    return change, f"table {table}: the next run {change.describe()}" if change else f"table {table}: schema unchanged"
