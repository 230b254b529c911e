package dev.sluice.files;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.classic.SparkSession;

/**
 * The landing files whose modification time is no longer the one the discovery index recorded when it found
 * them (rewritten in place after they were ingested: {@code source.on_overwrite}).
 *
 * <p>One listing of the source path with every file's status (a {@code stat} each on a local disk; in a bucket
 * the listing carries them) against the index's times, read from its snapshot: the log's text is not parsed.
 * A file the listing does not find (deleted, archived by {@code clean_source}) is not a rewrite. Nothing is
 * written: the index is read as it is.
 */
public final class Rewrites {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Rewrites() {}

  /**
   * {@code {"rewritten": [{"path", "ingested_ms", "mtime_ms", "size"}], "unseen": n}} as JSON text: the files
   * under {@code sourcePath} whose time differs from the index's for the checkpoint folder {@code metadataPath}
   * ({@code .../sources/0}), to the millisecond, or to the second when {@code toTheSecond} (an object store's
   * Last-Modified); and how many files the same listing found that the index has not (new since its last
   * batch: a run that will write); {@code unseen} is -1 when the index is empty (nothing was listed). With {@code handOver}, those files are kept for the first listing of
   * the query's source of this checkpoint ({@link IndexedFileSource#handOver}): the folder is walked once.
   * {@code firstUnseen} (may be null) is completed with true as soon as the listing meets a file the index has
   * not seen, before the rest of the folder is looked at, and with false when it found none or failed: work that
   * only a run with new files needs can start that much sooner.
   */
  public static String check(SparkSession spark, String metadataPath, String sourcePath, String pathGlobFilter,
      boolean toTheSecond, boolean handOver, CompletableFuture<Boolean> firstUnseen) throws IOException {
    try {
      return check(spark, metadataPath, sourcePath, pathGlobFilter, toTheSecond, handOver,
          firstUnseen == null ? () -> {} : () -> firstUnseen.complete(true));
    } finally {
      if (firstUnseen != null) {
        firstUnseen.complete(false); // nothing unseen, or the listing failed: a no-op once completed with true
      }
    }
  }

  private static String check(SparkSession spark, String metadataPath, String sourcePath, String pathGlobFilter,
      boolean toTheSecond, boolean handOver, Runnable onUnseen) throws IOException {
    Configuration conf = spark.sessionState().newHadoopConf();
    DiscoveryIndex index = DiscoveryIndex.readOnly(metadataPath, conf,
        spark.sessionState().conf().fileSourceLogCompactInterval());
    ObjectNode result = JSON.createObjectNode();
    ArrayNode out = result.putArray("rewritten");
    if (index.size() == 0) {
      result.put("unseen", -1);
      return result.toString();
    }
    Lister lister = new Lister(sourcePath, conf, pathGlobFilter);
    long start = System.nanoTime();
    List<FileEntry> changed = lister.changed(index::mtimeOf, toTheSecond, onUnseen);
    if (handOver) {
      IndexedFileSource.handOver(metadataPath, sourcePath, pathGlobFilter, index.latestBatch(), lister.unseen,
          (System.nanoTime() - start) / 1_000_000, lister.listRequests);
    }
    for (FileEntry f : changed) {
      ObjectNode r = out.addObject();
      r.put("path", f.path);
      r.put("ingested_ms", index.mtimeOf(f.key()));
      r.put("mtime_ms", f.mtime);
      r.put("size", f.size);
    }
    result.put("unseen", lister.unseen.size());
    return result.toString();
  }
}
