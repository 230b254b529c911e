package dev.sluice.files;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.execution.datasources.text.TextFileFormat;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;

/**
 * {@code spark.readStream.format("dev.sluice.files.IndexedFileSourceProvider").option("sluice.format", "json")
 * .schema(...).load(folder)}: Spark's file source with discovery of sluice's own ({@link IndexedFileSource}).
 *
 * <p>It is a {@code FileFormat} (text's) only so that Spark gives the stream the {@code _metadata} column of a
 * file source (its fields are those of json, csv and text); parquet's, with its {@code row_index}, is
 * {@link IndexedParquetSourceProvider}. Reading is the named format's, through Spark's own relation.
 */
public class IndexedFileSourceProvider extends TextFileFormat implements StreamSourceProvider {
  /**
   * The layout the stream was analysed with (at {@code load()}), for its source (at the query's start): a file
   * landing in between must not change the columns.
   */
  private static final Map<String, Layout> ANALYSED = new ConcurrentHashMap<>();

  private static String key(Option<StructType> schema, scala.collection.immutable.Map<String, String> parameters) {
    return (schema.isDefined() ? schema.get().json() : "") + "|" + parameters.toString();
  }

  @Override
  public String shortName() {
    return "sluice-files";
  }

  @Override
  public Tuple2<String, StructType> sourceSchema(
      SQLContext context, Option<StructType> schema, String provider,
      scala.collection.immutable.Map<String, String> parameters) {
    return schemaOf(context, schema, parameters);
  }

  @Override
  public Source createSource(SQLContext context, String metadataPath, Option<StructType> schema, String provider,
      scala.collection.immutable.Map<String, String> parameters) {
    return sourceOf(context, metadataPath, schema, parameters);
  }

  static Tuple2<String, StructType> schemaOf(SQLContext context, Option<StructType> schema,
      scala.collection.immutable.Map<String, String> parameters) {
    Layout layout = Layout.of((SparkSession) context.sparkSession(), schema, parameters);
    ANALYSED.put(key(schema, parameters), layout);
    return new Tuple2<>("sluice-files", layout.schema);
  }

  static Source sourceOf(SQLContext context, String metadataPath, Option<StructType> schema,
      scala.collection.immutable.Map<String, String> parameters) {
    SparkSession spark = (SparkSession) context.sparkSession();
    Layout layout = ANALYSED.get(key(schema, parameters));
    return new IndexedFileSource(spark, metadataPath, layout != null ? layout : Layout.of(spark, schema, parameters));
  }
}
