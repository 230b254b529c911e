"""Parsing records so that none is lost: every input record ends up a good row, or a bad one carrying its
raw text, where it came from and what is wrong with it (see :mod:`spark_jobs.batch.writer`, which sends bad
rows to the quarantine table).

A source DataFrame built here has the declared columns (plus ``_rescued`` for JSON) and three internal
columns, which never reach the sink table:

* ``__sluice_bad``: null for a good record; for a bad one, the error (``not a JSON object ...``, ``field(s)
  that do not fit the schema: amount DOUBLE``);
* ``__sluice_raw``: the record's text, for bad records;
* ``__sluice_origin``: the file it came from, or ``topic/partition/offset``, for bad records.

JSON is parsed as ``from_json`` parses it into the schema (PERMISSIVE, with a corrupt-record column, so a
value of the wrong type marks the record bad instead of turning into a silent null), and read for what the
schema does not say: the fields it does not declare, with their JSON types, for ``_rescued``, and which
declared fields hold a value (the names of the wrong ones). With the project's jar on the classpath
(``jvm/json``) both are one Catalyst expression per record (:data:`PARSE_CLASS`: Spark's own JSON parser over
the record's string for the columns, and what the field scan, :data:`SCAN_CLASS`, finds, whose values are read
as Spark reads a VARIANT: from the same tokens when every field is declared and flat, else by the scan), for a
schema of the types it takes; else ``from_json`` and the field scan; without the jar, ``from_json`` and
``from_json`` into a map of VARIANT values. The same answers each way, the one pass well under half the two
``from_json``'s time (docs/performance.md).
"""

from __future__ import annotations

import hashlib
import json
import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sluice.spec import RESCUED_COLUMN
from sluice.spec.ddl import parse_ddl_schema

BAD = "__sluice_bad"
RAW = "__sluice_raw"
ORIGIN = "__sluice_origin"
METADATA = "__sluice_metadata"
"""The file source's hidden ``_metadata`` column, carried as a real one for a transform that reads it."""
INTERNAL = (BAD, RAW, ORIGIN, METADATA)
CORRUPT = "__sluice_corrupt"
BOM = "\ufeff"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


PARSED = "__sluice_parsed"
FIELDS = "__sluice_fields"
NOT_AN_OBJECT = "not a JSON object (malformed, truncated, or not {...})"
MISFITS = "field(s) that do not fit the schema: "
"""A bad record's error, then the declared fields (``amount DOUBLE``) that hold a value of another type."""
MISFIT = "does not fit the schema"
"""A bad record's error when no declared field is named."""
SCAN_CLASS = "dev.sluice.json.FieldScan"
SCAN_FUNCTION = "sluice_field_scan"
SCAN_TYPE = "struct<present string, rescued string>"
VARIANT_DUPLICATE_KEYS = "spark.sql.variant.allowDuplicateKeys"
PARSE_CLASS = "dev.sluice.json.RecordParse"


def field_scan(spark: SparkSession) -> bool:
    """Whether the session has the project's field scan (registered as :data:`SCAN_FUNCTION`); False when
    its jar is not on the classpath (a spark-submit without the project's jars): the map parse then."""
    try:
        spark.udf.registerJavaFunction(SCAN_FUNCTION, SCAN_CLASS, SCAN_TYPE)
    except Exception:  # noqa: BLE001 - the class is missing (Spark's error type varies): not available
        return False
    return True


def record_parse(spark: SparkSession, schema: str, options: dict[str, str] | None = None) -> str | None:
    """The name under which the single pass (:data:`PARSE_CLASS`: the declared columns and the field scan
    in one expression) is registered for ``schema`` and the parser ``options``, or None: its jar is not on the
    classpath, or the schema has a type it does not hand back (``RecordParse.supports``), which ``from_json``
    then parses as before. The session's time zone is read now, as ``from_json`` reads it when planned."""
    fields = parse_ddl_schema(schema)
    names = [name for name, _ in fields]
    time_zone = spark.conf.get("spark.sql.session.timeZone")
    errors = "\x02".join([NOT_AN_OBJECT, MISFITS, MISFIT, *[_label(name, kind) for name, kind in fields]])
    declared = _schema_json(fields, spark.conf.get(TIMESTAMP_TYPE, "TIMESTAMP_LTZ")) or schema
    config = f"{declared}\x03{time_zone}\x03{_scan_config(spark, names, dict(options or {}))}\x03{errors}"
    name = "sluice_record_parse_" + hashlib.sha1(config.encode()).hexdigest()[:16]
    try:
        # one call: the function and its return type are made in the JVM (registerJavaFunction parses a type
        # string through several calls into the JVM and back, ~0.1-0.3 s of a run on a cold driver)
        registered = spark._jvm.dev.sluice.json.RecordParse.register(spark._jsparkSession, name, config)
    except Exception:  # noqa: BLE001 - the class is missing (py4j finds a package, not a class)
        return None
    return name if registered else None


#: Spark's JSON names of the simple types a declared field may have, by their DDL names (lower case).
SIMPLE_TYPES = {
    "string": "string", "boolean": "boolean", "binary": "binary", "date": "date", "timestamp_ntz": "timestamp_ntz",
    "timestamp_ltz": "timestamp", "tinyint": "byte", "byte": "byte", "smallint": "short", "short": "short",
    "int": "integer", "integer": "integer", "bigint": "long", "long": "long", "float": "float", "real": "float",
    "double": "double",
}
TIMESTAMP_TYPE = "spark.sql.timestampType"
_DECIMAL = re.compile(r"^(?:decimal|dec|numeric)(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _schema_json(fields: list[tuple[str, str]], timestamp_type: str) -> str | None:
    """A flat schema of simple types as Spark's JSON of it (what ``StructType.fromDDL`` gives, nullable), read by
    the JVM without Spark's SQL parser; None for anything else (a nested type, a quoted name, NOT NULL, a
    COMMENT, CHAR or VARCHAR), which goes as DDL. ``timestamp_type``: ``spark.sql.timestampType``, what
    ``TIMESTAMP`` means."""
    out = []
    for name, kind in fields:
        spelled = kind.strip().lower()
        if spelled == "timestamp":
            spelled = "timestamp_ntz" if timestamp_type.upper() == "TIMESTAMP_NTZ" else "timestamp_ltz"
        decimal = _DECIMAL.match(spelled)
        if not _PLAIN_NAME.match(name) or (spelled not in SIMPLE_TYPES and not decimal):
            return None
        if decimal and not int(decimal.group(2) or 0) <= int(decimal.group(1) or 10) <= 38:
            return None  # Spark's parser words what is wrong with it
        spark_type = (f"decimal({decimal.group(1) or 10},{decimal.group(2) or 0})" if decimal
                      else SIMPLE_TYPES[spelled])
        out.append({"name": name, "type": spark_type, "nullable": True, "metadata": {}})
    return json.dumps({"type": "struct", "fields": out}, separators=(",", ":"))


def _label(name: str, kind: str) -> str:
    """A declared field as a bad record's error names it."""
    return f"{name} {kind}"


def _scan_config(spark: SparkSession, names: list[str], options: dict[str, str]) -> str:
    """The scan's configuration argument (its format: ``FieldScan``'s documentation)."""
    duplicates = (spark.conf.get(VARIANT_DUPLICATE_KEYS, "false") or "false").lower()
    pairs = "".join(f"\x01{key}\x01{value}" for key, value in options.items())
    return "\x02".join(names) + f"\x01{duplicates}" + pairs


def json_columns(df: DataFrame, text: Column, schema: str, options: dict[str, str], *, rescue: bool,
                 keep: list[Column], scan: bool | None = None,
                 single: bool | None = None) -> tuple[DataFrame, list[Column], Column]:
    """``df`` with each record's JSON ``text`` parsed, and over it the declared columns (and ``_rescued``)
    and the error column (null when the record is good). ``text`` is expected not null.

    The two parses are columns of their own (``keep`` are the other columns carried along), so each runs
    once per record: written inline, Spark evaluates ``from_json`` again for every column that reads it
    (its expressions are interpreted, not code-generated, and not shared between the columns).

    ``scan``: read the undeclared fields with the field scan (None: when the session has it,
    :func:`field_scan`; False: the map parse, the reference the tests compare the scan with).

    ``single``: the declared columns and the scan in one pass (:func:`record_parse`; None: when the session
    has it and the schema's types allow, unless ``scan`` is False; False: ``from_json`` and the scan, the
    reference the tests compare it with)."""
    declared = parse_ddl_schema(schema)
    names, types = [name for name, _ in declared], dict(declared)
    # a UTF-8 byte-order mark at the start of a file (startswith: a regular expression per record costs more)
    text = F.when(text.startswith(BOM), F.substring(text, 2, 2**31 - 1)).otherwise(text)
    parse_options = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    spark = df.sparkSession
    one_pass = record_parse(spark, schema, options) if single is not False and scan is not False else None
    if single and one_pass is None:
        raise RuntimeError(f"{PARSE_CLASS} is not on the classpath, or does not take the schema {schema!r}")
    if one_pass is not None:
        scan = True  # the single pass holds the scan's answers
        # a projection of its own: the parse is not deterministic to Spark, which evaluates it once per record
        # and keeps it there (the other parses need the generator below for that, which copies every row again)
        staged = df.select(*keep, F.call_function(one_pass, text).alias(FIELDS))
        fields = F.col(FIELDS)
        parsed = fields.getField("value")
        # the error is the parse's own, made for the bad records only (RecordParse), worded as _error words it
        error = fields.getField("error")
    else:
        if scan is not False:
            available = field_scan(spark)  # registers it in the session
            if scan and not available:
                raise RuntimeError(f"{SCAN_CLASS} is not on the classpath: run `make sluice-jar` (var/jars/sluice)")
            scan = available
        if scan:
            read_fields = F.call_udf(SCAN_FUNCTION, text, F.lit(_scan_config(spark, names, dict(options))))
        else:
            read_fields = F.from_json(text, "map<string,variant>", dict(options))
        staged = df.select(F.inline(F.array(F.struct(
            *keep,
            F.from_json(text, f"{schema}, {_quote(CORRUPT)} STRING", parse_options).alias(PARSED),
            read_fields.alias(FIELDS),
        ))))
        parsed, fields = F.col(PARSED), F.col(FIELDS)
        error = _error(parsed, fields, scan, names, types)
    columns = [parsed.getField(n).alias(n) for n in names]
    if rescue and scan:
        columns.append(fields.getField("rescued").alias(RESCUED_COLUMN))
    elif rescue:
        known = F.array(*[F.lit(n) for n in names])
        extra = F.map_filter(fields, lambda k, _v: ~F.array_contains(known, k))
        # map_filter is interpreted: only for the records that have fields beyond the schema
        columns.append(F.when(F.size(F.array_except(F.map_keys(fields), known)) > 0, F.to_json(extra))
                       .alias(RESCUED_COLUMN))
    return staged, columns, error


def _error(parsed: Column, fields: Column, scan: bool, names: list[str], types: dict[str, str]) -> Column:
    """What is wrong with a record parsed by ``from_json`` (``parsed``) and read for its fields (``fields``: the
    scan's answer, or the map parse's), null for a good one. The single pass makes the same text itself
    (jvm/json ``RecordParse``)."""
    def holds_value(i: int, name: str) -> Column:
        if scan:
            return F.substring(fields.getField("present"), i + 1, 1) == "1"
        return fields.getItem(name).isNotNull() & ~F.call_function("is_variant_null", fields.getItem(name))

    mismatched = F.concat_ws(", ", *[
        F.when(holds_value(i, n) & parsed.getField(n).isNull(), F.lit(_label(n, types[n])))
        for i, n in enumerate(names)
    ])
    return (
        F.when(parsed.isNull() | fields.isNull(), F.lit(NOT_AN_OBJECT))
        .when(parsed.getField(CORRUPT).isNotNull(),
              F.when(mismatched != "", F.concat(F.lit(MISFITS), mismatched)).otherwise(F.lit(MISFIT)))
    )


def with_bad_columns(df: DataFrame, columns: list[Column], error: Column, raw: Column, origin: Column,
                     extra: list[Column] | None = None) -> DataFrame:
    """``df`` as the declared columns plus the internal ones."""
    return df.select(
        *columns,
        *(extra or []),
        error.alias(BAD),
        F.when(error.isNotNull(), raw).alias(RAW),
        F.when(error.isNotNull(), origin).alias(ORIGIN),
    )


def good_rows(df: DataFrame) -> DataFrame:
    """The good rows as the transform sees them (the view ``source``): without the internal columns, and
    the file's ``_metadata`` under its own name when it was carried along."""
    if BAD in df.columns:
        df = df.where(F.col(BAD).isNull())
    df = df.drop(*[c for c in (BAD, RAW, ORIGIN) if c in df.columns])
    return df.withColumnRenamed(METADATA, "_metadata") if METADATA in df.columns else df


def bad_rows(df: DataFrame) -> DataFrame:
    return df.where(F.col(BAD).isNotNull())
