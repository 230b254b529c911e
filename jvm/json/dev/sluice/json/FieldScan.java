package dev.sluice.json;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.StringWriter;
import java.time.ZoneOffset;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.catalyst.json.JSONOptions;
import org.apache.spark.types.variant.Variant;
import org.apache.spark.types.variant.VariantBuilder;

/**
 * One read of a JSON record for what sluice's second parse gave: {@code from_json(text, "map<string,variant>")},
 * then the undeclared fields as {@code to_json} of that map, and which declared fields hold a value. The
 * declared columns stay {@code from_json}'s own (the typed parse); this replaces only the map parse.
 *
 * <p>Same answers as the map parse: the parser is Spark's ({@link JSONOptions#buildJsonFactory} with the
 * spec's options), every value is read as Spark reads a VARIANT ({@link VariantBuilder#parseJson}: a
 * duplicate key inside a value makes the record unreadable unless allowed), an undeclared value is written as
 * {@code to_json} writes a VARIANT, keys in the record's order (a repeated top-level key kept, as the map
 * keeps it), and a declared field counts as present by its first occurrence (a map lookup finds the first).
 *
 * <p>Arguments: the record's text, and the configuration (built by spark_jobs/quality/records.py): the declared names
 * joined by U+0002, then, each after a U+0001, whether VARIANT keeps duplicate keys
 * ({@code spark.sql.variant.allowDuplicateKeys}) and the JSON options as name, value, name, value. Result: {@code struct<present string, rescued string>}, with
 * {@code present} a '1' or '0' per declared name (in order) and {@code rescued} null when there is no
 * undeclared field; or null when the text is not one JSON object (the map parse's null).
 */
public final class FieldScan implements UDF2<String, String, Row> {
  private static final long serialVersionUID = 1L;
  static final char SEP = '\u0001';
  static final char KV = '\u0002';
  private static final JsonFactory OUT = new JsonFactory();
  private static final Map<String, Config> CONFIGS = new ConcurrentHashMap<>();

  static final class Config {
    final Map<String, Integer> index = new HashMap<>();
    /** The declared names in order, interned as Jackson's parsers intern a field's name, each at its own index
     * (null where a name repeats an earlier one): a record's field is most often the one after the last. */
    final String[] ordered;
    final int size;
    final boolean allowDuplicateKeys;
    final JsonFactory factory;
    final Map<String, String> options = new HashMap<>();

    Config(String text) {
      String[] parts = text.split(String.valueOf(SEP), -1);
      String[] names = parts[0].isEmpty() ? new String[0] : parts[0].split(String.valueOf(KV), -1);
      for (int i = 0; i < names.length; i++) index.putIfAbsent(names[i], i);
      ordered = new String[names.length];
      for (int i = 0; i < names.length; i++) ordered[i] = index.get(names[i]) == i ? names[i].intern() : null;
      size = names.length;
      allowDuplicateKeys = Boolean.parseBoolean(parts[1]);
      for (int i = 2; i + 1 < parts.length; i += 2) options.put(parts[i], parts[i + 1]);
      factory = new JSONOptions(scalaMap(options), "UTC", "_corrupt_record").buildJsonFactory();
    }
  }

  static scala.collection.immutable.Map<String, String> scalaMap(Map<String, String> map) {
    return scala.collection.immutable.Map$.MODULE$.from(scala.jdk.javaapi.CollectionConverters.asScala(map));
  }

  @Override
  public Row call(String text, String configText) throws IOException {
    if (text == null) return null;
    return scan(CONFIGS.computeIfAbsent(configText, Config::new), text);
  }

  /** The scan of one record (not null): its result, or null when the text is not one JSON object. */
  static Row scan(Config config, String text) throws IOException {
    char[] present = new char[config.size];
    java.util.Arrays.fill(present, '0');
    boolean[] seen = new boolean[config.size];
    StringWriter rescued = null;
    JsonGenerator out = null;
    try (JsonParser p = config.factory.createParser(text)) {
      if (p.nextToken() != JsonToken.START_OBJECT) return null;
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        String key = p.currentName();
        JsonToken value = p.nextToken();
        Integer i = config.index.get(key);
        if (i == null) {
          Variant v = VariantBuilder.parseJson(p, config.allowDuplicateKeys);
          if (out == null) {
            rescued = new StringWriter();
            out = OUT.createGenerator(rescued);
            out.writeStartObject();
          }
          out.writeFieldName(key);
          out.writeRawValue(v.toJson(ZoneOffset.UTC));
        } else {
          if (!seen[i]) {
            seen[i] = true;
            present[i] = value == JsonToken.VALUE_NULL ? '0' : '1';
          }
          if (value == JsonToken.START_OBJECT || value == JsonToken.START_ARRAY) {
            VariantBuilder.parseJson(p, config.allowDuplicateKeys);  // read as the map parse reads it
          }
        }
      }
      if (t != JsonToken.END_OBJECT) return null;
    } catch (JsonProcessingException | IllegalArgumentException e) {
      return null;
    } catch (RuntimeException e) {
      if (isMalformedVariant(e)) return null;
      throw e;
    }
    String fields = null;
    if (out != null) {
      out.writeEndObject();
      out.close();
      fields = rescued.toString();
    }
    return RowFactory.create(new String(present), fields);
  }

  private static boolean isMalformedVariant(RuntimeException e) {
    // VariantBuilder's duplicate key: a SparkRuntimeException, which the map parse turns into a null record
    String name = e.getClass().getName();
    return name.endsWith("SparkRuntimeException") && String.valueOf(e.getMessage()).contains("DUPLICATE");
  }
}
