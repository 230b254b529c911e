package dev.sluice.files;

import java.util.function.Supplier;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;

/**
 * A batch's files, read from the index's log and statused only when the batch is planned.
 *
 * <p>At a restart Spark asks the source for the last committed batch again ({@code getBatch}) and throws the
 * answer away: with the batch's relation built at once, that cost a read of its file list (of a compact file
 * of every file ever found, when the batch was a compaction batch) and a file index over its files. Here the
 * list is read, and the index made, by the first question only a plan asks: the files, their size, their root
 * paths. The partition columns are the stream's, known when it was analysed.
 */
final class LazyFileIndex implements FileIndex {
  private final Supplier<FileIndex> make;
  private final StructType partitionSchema;
  private final String describe;
  private FileIndex made;

  LazyFileIndex(Supplier<FileIndex> make, StructType partitionSchema, String describe) {
    this.make = make;
    this.partitionSchema = partitionSchema;
    this.describe = describe;
  }

  private synchronized FileIndex index() {
    if (made == null) {
      made = make.get();
    }
    return made;
  }

  @Override
  public scala.collection.immutable.Seq<Path> rootPaths() {
    return index().rootPaths();
  }

  @Override
  public scala.collection.immutable.Seq<PartitionDirectory> listFiles(
      scala.collection.immutable.Seq<Expression> partitionFilters,
      scala.collection.immutable.Seq<Expression> dataFilters) {
    return index().listFiles(partitionFilters, dataFilters);
  }

  @Override
  public String[] inputFiles() {
    return index().inputFiles();
  }

  @Override
  public void refresh() {
    index().refresh();
  }

  @Override
  public long sizeInBytes() {
    return index().sizeInBytes();
  }

  @Override
  public StructType partitionSchema() {
    return partitionSchema;
  }

  @Override
  public scala.Option<Object> metadataOpsTimeNs() {
    return index().metadataOpsTimeNs();
  }

  @Override
  public String toString() {
    return "LazyFileIndex[" + describe + "]";
  }
}
