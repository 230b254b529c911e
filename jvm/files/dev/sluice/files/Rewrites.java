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
   * batch: a run that will write); {@code unseen} is -1 when the index is empty (nothing was listed). With
   * {@code handOver}, those files are kept for the first listing of the query's source of this checkpoint
   * ({@link IndexedFileSource#handOver}): the folder is walked once.
   * {@code found} (may be null) is completed with the count of new files ({@code unseen}) once they are known and
   * handed over, and with -1 for an empty index or a failed listing; {@code anyUnseen} (may be null) with true as
   * soon as the listing meets a new file, else with false at its end: work that only a run with new files needs
   * starts that much sooner.
   *
   * <p>On a local disk whose index holds at least {@value #NAMES_FIRST_FILES} files (Spark setting {@code
   * spark.sluice.rewrites.namesFirstFiles}), the new files come from a walk of the folder's names first (a
   * {@code stat} only for a name the index does not know), and the times of the files it knows from a second
   * walk after {@code found} is completed: what waits for the new files does not wait for a {@code stat} of every
   * file ingested before, which at that count takes longer than a run prepares its query. Below it, one walk
   * that looks at every file costs less in all (measured at 100,000 files: docs/performance.md).
   */
  public static String check(SparkSession spark, String metadataPath, String sourcePath, String pathGlobFilter,
      String listing, boolean toTheSecond, boolean handOver, CompletableFuture<Boolean> anyUnseen,
      CompletableFuture<Integer> found) throws IOException {
    try {
      return check(spark, metadataPath, sourcePath, pathGlobFilter, Listing.parse(listing), toTheSecond, handOver,
          anyUnseen == null ? () -> {} : () -> anyUnseen.complete(true), found == null ? n -> {} : found::complete);
    } finally {
      if (anyUnseen != null) {
        anyUnseen.complete(false); // a no-op once completed
      }
      if (found != null) {
        found.complete(-1);
      }
    }
  }

  /** The index's count of files from which a local disk's new files are listed by their names first. */
  static final long NAMES_FIRST_FILES = 250_000;

  private static String check(SparkSession spark, String metadataPath, String sourcePath, String pathGlobFilter,
      Listing listing, boolean toTheSecond, boolean handOver, Runnable onUnseen, java.util.function.IntConsumer found)
      throws IOException {
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
    Listing.Plan plan = listing.plan(index.marks(), lister.root(), System.currentTimeMillis());
    lister.startAfter(plan.startAfter());
    long namesFirstAt = Long.parseLong(spark.conf().get("spark.sluice.rewrites.namesFirstFiles",
        String.valueOf(NAMES_FIRST_FILES)));
    boolean namesFirst = lister.walksLocalDisk() && index.size() >= namesFirstAt;
    List<FileEntry> unseen;
    List<FileEntry> changed = null;
    if (namesFirst) {
      unseen = lister.list(key -> index.mtimeOf(key) == null);
      if (!unseen.isEmpty()) {
        onUnseen.run();
      }
    } else {
      changed = lister.changed(index::mtimeOf, toTheSecond, onUnseen);
      unseen = lister.unseen;
    }
    if (handOver) {
      IndexedFileSource.handOver(metadataPath, sourcePath, pathGlobFilter, index.latestBatch(), unseen,
          (System.nanoTime() - start) / 1_000_000, lister.listRequests, plan, lister.highest);
    }
    found.accept(unseen.size());
    if (namesFirst) {
      changed = lister.changed(index::mtimeOf, toTheSecond, () -> {}); // its new files: handed over, or later
    }
    for (FileEntry f : changed) {
      ObjectNode r = out.addObject();
      r.put("path", f.path);
      r.put("ingested_ms", index.mtimeOf(f.key()));
      r.put("mtime_ms", f.mtime);
      r.put("size", f.size);
    }
    result.put("unseen", unseen.size());
    result.put("listing", plan.full() ? "full" : "incremental");
    result.put("start_after", plan.startAfter());
    return result.toString();
  }
}
