package dev.sluice.files;

import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.datasources.FileStatusCache;
import scala.Option;

/**
 * The statuses of a batch's files as the listing found them, for Spark's file index: a batch of 100,000
 * files is read without a {@code stat} each (Spark would list them in a job of its own).
 */
final class KnownFiles extends FileStatusCache {
  private static final long BLOCK = 128L << 20;
  private final Map<Path, FileStatus[]> statuses = new HashMap<>();

  void add(Path path, long size, long mtime) {
    statuses.put(path, new FileStatus[] {new FileStatus(size, false, 1, BLOCK, mtime, path)});
  }

  @Override
  public Option<FileStatus[]> getLeafFiles(Path path) {
    return Option.apply(statuses.get(path));
  }

  @Override
  public void putLeafFiles(Path path, FileStatus[] files) {
    statuses.put(path, files);
  }

  @Override
  public void invalidateAll() {
    statuses.clear();
  }
}
