package dev.sluice.json;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.BadRecordException;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One UDF for both of sluice's reads of a JSON record: the declared columns as {@code from_json(text, schema)}
 * gives them (PERMISSIVE, with a corrupt-record column), and the field scan ({@link FieldScan}: the undeclared
 * fields and which declared fields hold a value). Both from the record's Java string, without Spark's
 * per-record character reader over the UTF-8 bytes, which is most of {@code from_json}'s cost.
 *
 * <p>The declared columns are Spark's own answer: the record goes through Spark's {@link JacksonParser} (built
 * as {@code from_json} builds it: the schema made nullable, the spec's options, the session's time zone, the
 * session's SQL settings as the task sees them), and a record it rejects gives its partial row and
 * {@code corrupt = true}, as {@code from_json}'s PERMISSIVE mode gives the partial row and the corrupt-record
 * column. Its values reach Spark through a Java UDF's external types, each chosen to convert back exactly
 * ({@code Instant}, {@code LocalDate}, {@code LocalDateTime}, {@code BigDecimal}); a schema with a type not
 * listed in {@link #supports} is not given to this UDF (spark_jobs/quality/records.py parses it with {@code from_json}).
 *
 * <p>Arguments: the record's text, and the configuration: the declared schema's DDL, U+0003, the session time
 * zone, U+0003, then {@link FieldScan}'s configuration. Result: {@code struct<present string, rescued string,
 * corrupt boolean, value struct<declared...>>}: {@code present} and {@code rescued} as {@link FieldScan}
 * gives them (both null when the text is not one JSON object), {@code value} and {@code corrupt} as
 * {@code from_json} gives the row and whether its corrupt-record column is set ({@code value} null where
 * {@code from_json} gives null); {@link #register} registers it with that type for a schema.
 */
public final class RecordParse implements UDF2<String, String, Row> {
  private static final long serialVersionUID = 1L;
  static final String PART = "\u0003";
  private static final ThreadLocal<Map<String, Config>> CONFIGS = ThreadLocal.withInitial(HashMap::new);

  static final class Config {
    final FieldScan.Config scan;
    final StructType schema;
    final JacksonParser parser;

    Config(String text) {
      String[] parts = text.split(PART, 3);
      schema = StructType.fromDDL(parts[0]).asNullable();
      scan = new FieldScan.Config(parts[2]);
      Map<String, String> options = new HashMap<>(scan.options);
      options.put("mode", "PERMISSIVE");
      // from_json takes the corrupt-record column out of the schema it parses into: none here
      JSONOptions json = new JSONOptions(FieldScan.scalaMap(options), parts[1], "_corrupt_record");
      parser = new JacksonParser(schema, json, false, JacksonParser.$lessinit$greater$default$4());
    }
  }

  /**
   * Registers this UDF in the session as {@code name} for a declared schema (DDL), its return type made here:
   * one call from the driver's Python (PySpark's {@code registerJavaFunction} parses a type string through
   * several calls into the JVM and back). Returns false, registering nothing, when {@link #supports} refuses a
   * type in the schema.
   */
  public static boolean register(org.apache.spark.sql.classic.SparkSession spark, String name, String ddl) {
    StructType schema = StructType.fromDDL(ddl).asNullable();
    if (!supports(schema)) return false;
    StructType returned = new StructType()
        .add("present", DataTypes.StringType)
        .add("rescued", DataTypes.StringType)
        .add("corrupt", DataTypes.BooleanType)
        .add("value", schema);
    spark.udf().registerJava(name, RecordParse.class.getName(), returned);
    return true;
  }

  /** The types whose values this UDF hands back exactly through a Java UDF's external types. */
  static boolean supports(DataType type) {
    if (type instanceof StructType struct) {
      for (StructField field : struct.fields()) {
        if (!supports(field.dataType())) return false;
      }
      return true;
    }
    if (type instanceof ArrayType array) return supports(array.elementType());
    return type instanceof StringType || type instanceof BooleanType || type instanceof ByteType
        || type instanceof ShortType || type instanceof IntegerType || type instanceof LongType
        || type instanceof FloatType || type instanceof DoubleType || type instanceof DecimalType
        || type instanceof BinaryType || type instanceof DateType || type instanceof TimestampType
        || type instanceof TimestampNTZType;
  }

  @Override
  public Row call(String text, String configText) throws IOException {
    if (text == null) return null;
    Config config = CONFIGS.get().computeIfAbsent(configText, Config::new);
    Row fields = FieldScan.scan(config.scan, text);  // null: not one JSON object
    InternalRow value = null;
    boolean corrupt = false;
    boolean none = false;
    try {
      scala.collection.Iterator<InternalRow> rows = config.parser.parse(
          text, RecordParse::createParser, UTF8String::fromString).iterator();
      if (rows.hasNext()) value = rows.next();
      else none = true;  // a blank text: from_json's null
    } catch (Exception e) {  // Scala declares no checked exception: BadRecordException is one in Java
      if (!(e instanceof BadRecordException bad)) throw e;
      corrupt = true;  // from_json's PERMISSIVE row: the partial result, or all null, and the corrupt column
      InternalRow[] partial = bad.partialResults().apply();
      value = partial.length > 0 ? partial[0] : null;
    }
    Row row = none ? null : value == null ? emptyRow(config.schema) : toRow(value, config.schema);
    return RowFactory.create(fields == null ? null : fields.get(0), fields == null ? null : fields.get(1),
        corrupt, row);
  }

  private static com.fasterxml.jackson.core.JsonParser createParser(
      com.fasterxml.jackson.core.JsonFactory factory, String text) {
    try {
      return factory.createParser(text);
    } catch (IOException e) {  // not for a String; thrown as it is, as from_json's own parser creation would
      throw RecordParse.<RuntimeException>sneaky(e);
    }
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E sneaky(Throwable e) throws E {
    throw (E) e;
  }

  private static Row emptyRow(StructType schema) {
    return RowFactory.create(new Object[schema.fields().length]);
  }

  private static Row toRow(InternalRow row, StructType schema) {
    StructField[] fields = schema.fields();
    Object[] values = new Object[fields.length];
    for (int i = 0; i < fields.length; i++) {
      DataType type = fields[i].dataType();
      values[i] = row.isNullAt(i) ? null : external(row.get(i, type), type);
    }
    return RowFactory.create(values);
  }

  /** An internal value as the external one that Spark converts back to the same internal value. */
  private static Object external(Object value, DataType type) {
    if (value == null) return null;
    if (type instanceof StringType) return value.toString();
    if (type instanceof DecimalType) return ((Decimal) value).toJavaBigDecimal();
    if (type instanceof DateType) return DateTimeUtils.daysToLocalDate((Integer) value);
    if (type instanceof TimestampType) return DateTimeUtils.microsToInstant((Long) value);
    if (type instanceof TimestampNTZType) return DateTimeUtils.microsToLocalDateTime((Long) value);
    if (type instanceof StructType struct) return toRow((InternalRow) value, struct);
    if (type instanceof ArrayType array) {
      ArrayData data = (ArrayData) value;
      DataType element = array.elementType();
      List<Object> out = new ArrayList<>(data.numElements());
      for (int i = 0; i < data.numElements(); i++) {
        out.add(data.isNullAt(i) ? null : external(data.get(i, element), element));
      }
      return out;
    }
    return value;  // boolean, numbers, binary: the same object either way
  }
}
