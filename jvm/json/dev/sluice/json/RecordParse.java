package dev.sluice.json;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonStreamContext;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.util.BufferRecycler;
import com.fasterxml.jackson.core.util.JsonParserDelegate;
import com.fasterxml.jackson.core.util.RecyclerPool;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.BadRecordException;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DateType;
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
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One parse for both of sluice's reads of a JSON record: the declared columns as {@code from_json(text, schema)}
 * gives them (PERMISSIVE, with a corrupt-record column), and the field scan ({@link FieldScan}: the undeclared
 * fields and which declared fields hold a value). Both from the record's bytes when they are ASCII characters, as
 * Spark's file reader reads a line, else from its Java string; never through {@code from_json}'s per-record
 * character reader over the UTF-8 bytes, which is most of its cost.
 *
 * <p>The declared columns are Spark's own answer: the record goes through Spark's {@link JacksonParser} (built
 * as {@code from_json} builds it: the schema made nullable, the spec's options, the session's time zone, the
 * session's SQL settings as the task sees them), and a record it rejects gives its partial row and
 * {@code corrupt = true}, as {@code from_json}'s PERMISSIVE mode gives the partial row and the corrupt-record
 * column. The answer is Spark's internal row ({@link RecordParseExpression}, a Catalyst expression); a schema
 * with a type not listed in {@link #supports} is not given to it (spark_jobs/quality/records.py parses it with
 * {@code from_json}).
 *
 * <p>One tokenization for most records: Spark's parser reads the record through a {@link Watch}, which sees the
 * tokens it reads and notes the top-level fields. When the record is one JSON object that Spark's parser took
 * whole, whose fields are all declared and hold no object or array, the watch has the field scan's answer
 * (which fields hold a value; nothing to rescue), and the scan is not run. Any other record (an undeclared
 * field, a nested value, a record Spark's parser rejects, not an object) is scanned as well, as before.
 *
 * <p>Made with its configuration ({@link #register}): the declared schema's DDL or JSON ({@link #schema}), U+0003,
 * the session time zone, U+0003, {@link FieldScan}'s configuration, U+0003, then the error's texts joined by
 * U+0002: not one JSON object,
 * the prefix of the fields that do not fit, the text when none is named, and each declared field's label. Argument:
 * the record's text. Result: {@code struct<present string, rescued string, corrupt boolean,
 * value struct<declared...>, error string>}: {@code present} and {@code rescued} as {@link FieldScan} gives them
 * (both null when the text is not one JSON object), {@code value} and {@code corrupt} as {@code from_json} gives
 * the row and whether its corrupt-record column is set ({@code value} null where {@code from_json} gives null),
 * {@code error} what is wrong with the record (null for a good one), as spark_jobs/quality/records.py words it
 * for the other parses: made here, for the bad records only, rather than as expressions in every record's
 * generated code (a CASE over every declared field, twice).
 */
public final class RecordParse {
  static final String PART = "\u0003";
  private static final ThreadLocal<Map<String, Config>> CONFIGS = ThreadLocal.withInitial(HashMap::new);

  /**
   * A configuration's parser and what it reads a record with, for one thread: Spark's parser keeps state while
   * it reads a record, and so do the {@link Watch} and the buffers here, which every record of the thread reuses.
   */
  static final class Config {
    final FieldScan.Config scan;
    final StructType schema;
    final JacksonParser parser;
    /** Spark's JSON factory for these options, whose parsers take their buffers from a {@link HeldBuffers}. */
    final JsonFactory factory;
    final Watch watch;
    /** The record's Jackson parser, as Spark's parser asks for it: through the watch, from {@link #factory}. */
    final scala.Function2<JsonFactory, String, com.fasterxml.jackson.core.JsonParser> open;
    /** The same over a record's UTF-8 bytes (of ASCII characters only: {@link #plainAscii}). */
    final scala.Function2<JsonFactory, UTF8String, com.fasterxml.jackson.core.JsonParser> openBytes;
    /** A bad record's error: not one JSON object; fields that do not fit (the prefix, then the labels); none named. */
    final UTF8String notAnObject;
    final String misfitPrefix;
    final UTF8String noMisfit;
    /** Each declared field as the error names it ({@code amount DOUBLE}). */
    final String[] labels;

    Config(String text, StructType declared) {
      String[] parts = text.split(PART, 4);
      schema = declared;
      scan = new FieldScan.Config(parts[2]);
      String[] errors = parts[3].split(String.valueOf(FieldScan.KV), -1);
      notAnObject = UTF8String.fromString(errors[0]);
      misfitPrefix = errors[1];
      noMisfit = UTF8String.fromString(errors[2]);
      labels = java.util.Arrays.copyOfRange(errors, 3, errors.length);
      Map<String, String> options = new HashMap<>(scan.options);
      options.put("mode", "PERMISSIVE");
      // from_json takes the corrupt-record column out of the schema it parses into: none here
      JSONOptions json = new JSONOptions(FieldScan.scalaMap(options), parts[1], "_corrupt_record");
      parser = new JacksonParser(schema, json, false, JacksonParser.$lessinit$greater$default$4());
      // the factory Spark's parser builds, its settings kept whole (rebuild), its buffers this thread's own
      factory = json.buildJsonFactory().rebuild().recyclerPool(new HeldBuffers()).build();
      watch = new Watch(scan);
      open = (ignored, record) -> watch.on(createParser(factory, record));
      openBytes = (ignored, record) -> watch.on(createParser(factory, record));
    }
  }

  /**
   * Jackson's buffers for one thread's parsers, held here rather than looked up in a thread-local for every record
   * (Jackson's default pool): a record's parser is closed before the next one opens, as with that pool.
   */
  static final class HeldBuffers extends RecyclerPool.ThreadLocalPoolBase<BufferRecycler> {
    private static final long serialVersionUID = 1L;
    private final transient BufferRecycler held = new BufferRecycler();

    @Override
    public BufferRecycler acquirePooled() {
      return held;
    }
  }

  private RecordParse() {}

  /** The parser for a configuration, one per thread (Spark's parser keeps state while it reads a record). */
  static Config config(String configText, StructType declared) {
    return CONFIGS.get().computeIfAbsent(configText, text -> new Config(text, declared));
  }

  /**
   * Registers the parse in the session as the function {@code name} of one argument (the record's text) for its
   * configuration, its return type made here: one call from the driver's Python. Returns false, registering
   * nothing, when {@link #supports} refuses a type in the schema.
   */
  public static boolean register(org.apache.spark.sql.classic.SparkSession spark, String name, String configText) {
    StructType schema = schema(configText.split(PART, 2)[0]);
    if (!supports(schema)) return false;
    StructType returned = new StructType()
        .add("present", DataTypes.StringType)
        .add("rescued", DataTypes.StringType)
        .add("corrupt", DataTypes.BooleanType)
        .add("value", schema)
        .add("error", DataTypes.StringType);
    spark.sessionState().functionRegistry().createOrReplaceTempFunction(name,
        (scala.Function1<scala.collection.immutable.Seq<Expression>, Expression>) arguments -> {
          if (arguments.size() != 1) {
            throw new IllegalArgumentException(name + " takes one argument, the record's text");
          }
          return new RecordParseExpression(arguments.head(), configText, returned);
        }, "scala_udf");
    return true;
  }

  /**
   * The declared schema, made nullable: from its JSON (sluice's own spelling of a flat schema of simple types,
   * spark_jobs/quality/records.py, read without Spark's SQL parser, which a cold driver takes ~0.1 s to start)
   * or its DDL.
   */
  static StructType schema(String text) {
    DataType type = text.startsWith("{") ? DataType.fromJson(text) : StructType.fromDDL(text);
    return ((StructType) type).asNullable();
  }

  /**
   * The types the parse is compared with {@code from_json} for (test_record_parse): the ones a Java UDF's
   * external types handed back exactly, when it was one. Others (a map) are parsed by {@code from_json}.
   */
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

  /**
   * The answer for one record's text (not null), as the class's documentation gives it.
   *
   * <p>A record of ASCII characters ({@link #plainAscii}) is read from its bytes, as Spark's file reader reads a
   * line: they are its characters, one byte each. Any other is decoded into a Java string first, as
   * {@code from_json} decodes it (a malformed byte becomes U+FFFD there, where Jackson's byte parser would stop).
   * The answers are the same either way ({@link Watch#currentTokenLocation}).
   */
  static InternalRow parse(Config config, UTF8String text) {
    Watch watch = config.watch.reset();
    String decoded = null;
    InternalRow value = null;
    boolean corrupt = false;
    boolean none = false;
    try {
      scala.collection.Iterable<InternalRow> parsed;
      if (plainAscii(text)) {
        parsed = config.parser.parse(text, config.openBytes, record -> record);
      } else {
        decoded = text.toString();
        parsed = config.parser.parse(decoded, config.open, UTF8String::fromString);
      }
      scala.collection.Iterator<InternalRow> rows = parsed.iterator();
      if (rows.hasNext()) value = rows.next();
      else none = true;  // a blank text: from_json's null
    } catch (Exception e) {  // Scala declares no checked exception: BadRecordException is one in Java
      if (!(e instanceof BadRecordException bad)) throw e;
      corrupt = true;  // from_json's PERMISSIVE row: the partial result, or all null, and the corrupt column
      InternalRow[] partial = bad.partialResults().apply();
      value = partial.length > 0 ? partial[0] : null;
    }
    UTF8String present = null;
    UTF8String rescued = null;
    if (!corrupt && !none && watch.complete()) {
      present = watch.present();  // the scan's answer, from the tokens Spark's parser read
    } else {
      Row fields = scan(config, decoded != null ? decoded : text.toString());  // null: not one JSON object
      if (fields != null) {
        present = UTF8String.fromString(fields.getString(0));
        rescued = fields.isNullAt(1) ? null : UTF8String.fromString(fields.getString(1));
      }
    }
    InternalRow row = none ? null : value == null ? new GenericInternalRow(config.schema.fields().length) : value;
    return new GenericInternalRow(new Object[] {present, rescued, corrupt, row, error(config, row, present, corrupt)});
  }

  /**
   * The record's error, null for a good record: not one JSON object (no row, or the scan found no object); else,
   * when Spark's parser rejected it, the declared fields that hold a value the schema's type does not take (each
   * as its label, in declared order), or that it does not fit the schema at all.
   */
  private static UTF8String error(Config config, InternalRow row, UTF8String present, boolean corrupt) {
    if (row == null || present == null) return config.notAnObject;
    if (!corrupt) return null;
    StringBuilder misfits = new StringBuilder();
    byte[] holds = present.getBytes();
    for (int i = 0; i < config.labels.length; i++) {
      if (holds[i] == '1' && row.isNullAt(i)) {
        misfits.append(misfits.length() == 0 ? config.misfitPrefix : ", ").append(config.labels[i]);
      }
    }
    return misfits.length() == 0 ? config.noMisfit : UTF8String.fromString(misfits.toString());
  }

  /**
   * Whether every byte of the text is an ASCII character other than NUL: its UTF-8 bytes are then its characters
   * one for one, and Jackson's detection of the encoding (which looks for zero bytes) reads them as UTF-8.
   */
  static boolean plainAscii(UTF8String text) {
    Object base = text.getBaseObject();
    long at = text.getBaseOffset();
    long end = at + text.numBytes();
    for (; at + 8 <= end; at += 8) {
      long word = Platform.getLong(base, at);
      // a byte of 0x80 or more, or a zero byte (the usual test for one: a borrow reaches its high bit)
      if (((word | (word - 0x0101010101010101L)) & 0x8080808080808080L) != 0) return false;
    }
    for (; at < end; at++) {
      if (Platform.getByte(base, at) <= 0) return false;
    }
    return true;
  }

  private static Row scan(Config config, String text) {
    try {
      return FieldScan.scan(config.scan, text);
    } catch (IOException e) {  // writing to a string: not expected
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * The parser Spark's parser reads a record through, noting what {@link FieldScan} would find at the top level:
   * which declared fields hold a value (by their first occurrence, as the scan counts them), and whether the
   * record is one it can answer for without the scan (see {@link #complete}). It changes no token.
   */
  static final class Watch extends JsonParserDelegate {
    private final FieldScan.Config scan;
    private final byte[] present;  // '0' or '1' a declared field, ASCII: the answer's bytes as they are
    private final boolean[] seen;
    private int tokens;
    private int pending = -1;  // a declared top-level field whose value is the next token
    private boolean first;  // ... and that is its first occurrence
    private boolean object;  // the first token opened an object
    private boolean closed;  // ... and that object's end was read
    private boolean other;  // an undeclared field, or an object or array in a declared one: the scan's work
    private int after;  // the declared field after the last one seen: the likeliest next

    Watch(FieldScan.Config scan) {
      super(null);
      this.scan = scan;
      present = new byte[scan.size];
      seen = new boolean[scan.size];
    }

    /** Ready for the next record: nothing seen. */
    Watch reset() {
      java.util.Arrays.fill(present, (byte) '0');
      java.util.Arrays.fill(seen, false);
      tokens = 0;
      after = 0;
      pending = -1;
      first = object = closed = other = false;
      delegate = null;
      return this;
    }

    Watch on(com.fasterxml.jackson.core.JsonParser parser) {
      delegate = parser;
      return this;
    }

    /** A top-level field's declared index, or -1: the same (interned) name as the next declared one, else looked up. */
    private int indexOf(String name) {
      if (after < scan.ordered.length && scan.ordered[after] == name) return after;
      Integer i = scan.index.get(name);
      return i == null ? -1 : i;
    }

    /** Whether Spark's parser read one whole object of declared fields with no object or array in them. */
    boolean complete() {
      return object && closed && !other;
    }

    /**
     * Where the current token starts, without the record's content: Spark's parser reads a STRING field that
     * holds a number or an object back from the input's exact bytes when they are a byte array, and writes the
     * value again (as {@code from_json}, given characters, does) for any other content. The parse answers as
     * {@code from_json} does, whether it reads the record's bytes or its characters.
     */
    @Override
    public JsonLocation currentTokenLocation() {
      return JsonLocation.NA;
    }

    @Override
    @Deprecated
    public JsonLocation getTokenLocation() {
      return JsonLocation.NA;
    }

    UTF8String present() {
      return UTF8String.fromBytes(present.clone());  // the answer keeps its bytes: the array serves the next record
    }

    @Override
    public JsonToken nextToken() throws IOException {
      JsonToken t = delegate.nextToken();
      if (tokens++ == 0) {
        object = t == JsonToken.START_OBJECT;
        return t;
      }
      if (pending >= 0) {  // the value of a declared field
        if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) other = true;
        if (first) present[pending] = (byte) (t == JsonToken.VALUE_NULL ? '0' : '1');
        pending = -1;
        return t;
      }
      if (t == JsonToken.FIELD_NAME) {
        JsonStreamContext parent = delegate.getParsingContext().getParent();
        if (parent != null && parent.inRoot()) {
          int i = indexOf(delegate.currentName());
          if (i < 0) {
            other = true;
          } else {
            first = !seen[i];
            seen[i] = true;
            pending = i;
            after = i + 1;
          }
        }
      } else if (t == JsonToken.END_OBJECT && delegate.getParsingContext().inRoot()) {
        closed = true;
      }
      return t;
    }
  }

  /** A parser over the record's UTF-8 bytes, where they lie (a row's buffer, read only), or a copy of them. */
  private static com.fasterxml.jackson.core.JsonParser createParser(JsonFactory factory, UTF8String text) {
    try {
      if (text.getBaseObject() instanceof byte[] bytes) {
        return factory.createParser(bytes, (int) (text.getBaseOffset() - Platform.BYTE_ARRAY_OFFSET), text.numBytes());
      }
      return factory.createParser(text.getBytes());
    } catch (IOException e) {  // not for bytes in memory; thrown as it is, as Spark's own parser creation would
      throw RecordParse.<RuntimeException>sneaky(e);
    }
  }

  private static com.fasterxml.jackson.core.JsonParser createParser(JsonFactory factory, String text) {
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
}
