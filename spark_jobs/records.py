"""Parsing records so that none is lost: every input record ends up a good row, or a bad one carrying its
raw text, where it came from and what is wrong with it (see :mod:`spark_jobs.batch_writer`, which sends bad
rows to the quarantine table).

A source DataFrame built here has the declared columns (plus ``_rescued`` for JSON) and three internal
columns, which never reach the sink table:

* ``__sluice_bad``: null for a good record; for a bad one, the error (``not a JSON object ...``, ``field(s)
  that do not fit the schema: amount DOUBLE``);
* ``__sluice_raw``: the record's text, for bad records;
* ``__sluice_origin``: the file it came from, or ``topic/partition/offset``, for bad records.

JSON is parsed with ``from_json`` twice: into the schema (PERMISSIVE, with a corrupt-record column, so a
value of the wrong type marks the record bad instead of turning into a silent null), and into a map of
VARIANT values, which keeps the fields the schema does not declare, with their JSON types, for ``_rescued``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sluice.ddl import parse_ddl_schema
from sluice.spec import RESCUED_COLUMN

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


def json_columns(df: DataFrame, text: Column, schema: str, options: dict[str, str], *, rescue: bool,
                 keep: list[Column]) -> tuple[DataFrame, list[Column], Column]:
    """``df`` with each record's JSON ``text`` parsed, and over it the declared columns (and ``_rescued``)
    and the error column (null when the record is good). ``text`` is expected not null.

    The two parses are columns of their own (``keep`` are the other columns carried along), so each runs
    once per record: written inline, Spark evaluates ``from_json`` again for every column that reads it
    (its expressions are interpreted, not code-generated, and not shared between the columns)."""
    names = [name for name, _ in parse_ddl_schema(schema)]
    types = dict(parse_ddl_schema(schema))
    # a UTF-8 byte-order mark at the start of a file (startswith: a regular expression per record costs more)
    text = F.when(text.startswith(BOM), F.substring(text, 2, 2**31 - 1)).otherwise(text)
    parse_options = {**options, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    staged = df.select(F.inline(F.array(F.struct(
        *keep,
        F.from_json(text, f"{schema}, {_quote(CORRUPT)} STRING", parse_options).alias(PARSED),
        F.from_json(text, "map<string,variant>", dict(options)).alias(FIELDS),
    ))))
    parsed, fields = F.col(PARSED), F.col(FIELDS)
    mismatched = F.concat_ws(", ", *[
        F.when(
            fields.getItem(n).isNotNull()
            & ~F.call_function("is_variant_null", fields.getItem(n))
            & parsed.getField(n).isNull(),
            F.lit(f"{n} {types[n]}"),
        )
        for n in names
    ])
    error = (
        F.when(parsed.isNull() | fields.isNull(), F.lit(NOT_AN_OBJECT))
        .when(parsed.getField(CORRUPT).isNotNull(),
              F.when(mismatched != "", F.concat(F.lit("field(s) that do not fit the schema: "), mismatched))
              .otherwise(F.lit("does not fit the schema")))
    )
    columns = [parsed.getField(n).alias(n) for n in names]
    if rescue:
        known = F.array(*[F.lit(n) for n in names])
        extra = F.map_filter(fields, lambda k, _v: ~F.array_contains(known, k))
        # map_filter is interpreted: only for the records that have fields beyond the schema
        columns.append(F.when(F.size(F.array_except(F.map_keys(fields), known)) > 0, F.to_json(extra))
                       .alias(RESCUED_COLUMN))
    return staged, columns, error


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
