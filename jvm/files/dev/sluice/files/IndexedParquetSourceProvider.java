package dev.sluice.files;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;

/** {@link IndexedFileSourceProvider} for parquet: the stream's {@code _metadata} has parquet's fields. */
public class IndexedParquetSourceProvider extends ParquetFileFormat implements StreamSourceProvider {
  @Override
  public String shortName() {
    return "sluice-parquet-files";
  }

  @Override
  public Tuple2<String, StructType> sourceSchema(SQLContext context, Option<StructType> schema, String provider,
      scala.collection.immutable.Map<String, String> parameters) {
    return IndexedFileSourceProvider.schemaOf(context, schema, parameters);
  }

  @Override
  public Source createSource(SQLContext context, String metadataPath, Option<StructType> schema, String provider,
      scala.collection.immutable.Map<String, String> parameters) {
    return IndexedFileSourceProvider.sourceOf(context, metadataPath, schema, parameters);
  }
}
