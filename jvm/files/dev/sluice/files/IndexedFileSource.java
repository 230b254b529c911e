package dev.sluice.files;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxFiles;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.streaming.Offset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.execution.streaming.runtime.FileStreamSourceOffset;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * A file source whose discovery costs what the new files cost, not what the folder's history costs.
 *
 * <p>Spark's own file source ({@code FileStreamSource}) restores every file it has ever read into the driver
 * at each start and lists the whole folder, with a status per file, for each batch. This one keeps what it
 * found in a {@link DiscoveryIndex} (128-bit digests of the paths, read from one binary snapshot and the few
 * batch lists after it) and lists with a {@link Lister} that reads names and looks only at the new ones.
 *
 * <p>Progress is Spark's: the offset of a batch is the number of its file list ({@code {"logOffset":n}}, as
 * Spark's file source writes it), the list is written whole before the offset is, and a batch the query
 * replays after a crash reads the same list. A checkpoint of Spark's file source continues here without a file
 * read twice or missed: its log has the same form.
 */
public final class IndexedFileSource implements Source, SupportsTriggerAvailableNow {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<String, String> REPORTS = new ConcurrentHashMap<>();
  /** The latest source of each checkpoint in this JVM, until its run asks for its backlog or forgets it. */
  private static final Map<String, IndexedFileSource> LATEST = new ConcurrentHashMap<>();
  /** A listing made before the query for the source of each checkpoint ({@link #handOver}), until taken. */
  private static final Map<String, Listed> HANDED = new ConcurrentHashMap<>();

  /** The new files of a listing made for a run before its query, against its index at {@code latestBatch}. */
  private record Listed(String path, String pathGlobFilter, long latestBatch, List<FileEntry> files, long ms,
      long requests, Listing.Plan plan, String highest) {}

  /** A listing whose new files are not all in the index yet: its marks wait for them ({@link Listing}). */
  private static final class Pending {
    final Listing.Plan plan;
    final String highest;
    long taken;

    Pending(Listing.Plan plan, String highest) {
      this.plan = plan;
      this.highest = highest;
    }
  }

  private final SparkSession spark;
  private final String metadataPath;
  private final Layout layout;
  private final DiscoveryIndex index;
  private final Lister lister;
  private final long restoreMs;
  private List<FileEntry> availableNow;
  private long listMs;
  private long listings;
  private long found;
  private final int listsReadAtStart;
  /** What the first listing found new: the backlog when the run started. */
  private ObjectNode backlogBefore;
  /** Whether the run's new files were weighed for the driver's compiler ({@link Compilers}). */
  private boolean sized;
  /** Whether the first listing was the one handed over ({@link #handOver}). */
  private boolean listedBefore;
  /** The plan of the run's first listing: what its report says. */
  private Listing.Plan firstPlan;
  private Pending pending;
  private boolean marked;

  IndexedFileSource(SparkSession spark, String metadataPath, Layout layout) {
    this.spark = spark;
    this.metadataPath = metadataPath;
    this.layout = layout;
    long start = System.nanoTime();
    try {
      this.index = new DiscoveryIndex(metadataPath, spark.sessionState().newHadoopConf(),
          spark.sessionState().conf().fileSourceLogCompactInterval());
      this.lister = new Lister(layout.path, spark.sessionState().newHadoopConf(), layout.pathGlobFilter);
    } catch (IOException e) {
      throw new UncheckedIOException("sluice's discovery index in " + metadataPath + " cannot be read: " + e, e);
    }
    this.restoreMs = (System.nanoTime() - start) / 1_000_000;
    this.listsReadAtStart = index.listsRead();
    report();
    LATEST.put(DiscoveryIndex.key(metadataPath), this);
  }

  /**
   * The backlog the run that made the source of this checkpoint folder ({@code .../sources/0}) leaves: one
   * more listing against its index ({"files", "bytes", "oldest_ms", "listing_ms"}), or null when no source of
   * it was made in this JVM. The source is forgotten.
   */
  public static String backlogAfter(String metadataPath) {
    IndexedFileSource source = LATEST.remove(DiscoveryIndex.key(metadataPath));
    if (source == null) {
      return null;
    }
    synchronized (source) {
      long start = System.nanoTime();
      ObjectNode b = backlog(source.listNew());
      b.put("listing_ms", (System.nanoTime() - start) / 1_000_000);
      return b.toString();
    }
  }

  /**
   * Drops what {@link #backlogAfter} would have used (a dry run's source, a failed run's), and a listing handed
   * over that no source took ({@link #handOver}).
   */
  public static void forget(String metadataPath) {
    LATEST.remove(DiscoveryIndex.key(metadataPath));
    HANDED.remove(DiscoveryIndex.key(metadataPath));
  }

  /**
   * The new files (oldest first) that a listing of {@code path} found against the index of this checkpoint
   * folder at its batch {@code latestBatch} ({@link Rewrites#check}, while the run prepared its query), for
   * the first listing of the query's source: taken instead of walking the folder again when the source's
   * index is at that batch and lists the same path with the same filter (else dropped). A file landing in
   * between is found by the next listing, as one landing after a listing always is.
   */
  static void handOver(String metadataPath, String path, String pathGlobFilter, long latestBatch,
      List<FileEntry> files, long ms, long requests, Listing.Plan plan, String highest) {
    HANDED.put(DiscoveryIndex.key(metadataPath),
        new Listed(path, pathGlobFilter, latestBatch, List.copyOf(files), ms, requests, plan, highest));
  }

  private static ObjectNode backlog(List<FileEntry> files) {
    long bytes = 0;
    long oldest = Long.MAX_VALUE;
    for (FileEntry f : files) {
      bytes += Math.max(0, f.size);
      oldest = Math.min(oldest, f.mtime);
    }
    ObjectNode b = JSON.createObjectNode();
    b.put("files", files.size());
    b.put("bytes", bytes);
    if (!files.isEmpty()) {
      b.put("oldest_ms", oldest);
    }
    return b;
  }

  /** What the source of the query with this checkpoint folder ({@code .../sources/0}) did: JSON, or null. */
  public static String report(String metadataPath) {
    return REPORTS.get(DiscoveryIndex.key(metadataPath));
  }

  @Override
  public StructType schema() {
    return layout.schema;
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return layout.maxFiles > 0 ? ReadLimit.maxFiles(layout.maxFiles) : ReadLimit.allAvailable();
  }

  @Override
  public synchronized void prepareForTriggerAvailableNow() {
    availableNow = listNew();
  }

  @Override
  public Option<Offset> getOffset() {
    throw new UnsupportedOperationException("latestOffset(start, limit) is the source's entry point");
  }

  @Override
  public synchronized org.apache.spark.sql.connector.read.streaming.Offset latestOffset(
      org.apache.spark.sql.connector.read.streaming.Offset start, ReadLimit limit) {
    List<FileEntry> fresh;
    if (availableNow != null) {
      fresh = new ArrayList<>();
      for (FileEntry f : availableNow) {
        if (!index.contains(f.key())) {
          fresh.add(f);
        }
      }
    } else {
      fresh = listNew();
    }
    if (!sized) { // the run's new files, before any batch: C2 for a large run (SLUICE_DRIVER_JIT=auto)
      sized = true;
      long bytes = 0;
      for (FileEntry f : fresh) {
        bytes += f.size;
      }
      Compilers.releaseForBytes(spark, bytes);
    }
    int take = fresh.size();
    if (limit instanceof ReadMaxFiles) {
      take = Math.min(take, ((ReadMaxFiles) limit).maxFiles());
    }
    if (take > 0) {
      try {
        index.add(fresh.subList(0, take));
      } catch (IOException e) {
        throw new UncheckedIOException("sluice's discovery index in " + metadataPath + " cannot be written: " + e, e);
      }
      found += take;
    }
    if (pending != null) {
      pending.taken += take;
      if (take == fresh.size()) {
        mark();
      }
    }
    report();
    long latest = index.latestBatch();
    return latest < 0 ? null : FileStreamSourceOffset.apply(latest);
  }

  /**
   * The new files of the listing pending are all in the index: its marks are written when it found some (the
   * mark moves) or was a full listing (when the next is due). A run with nothing new writes nothing. A mark
   * that cannot be written leaves the older ones: the next listing reads more names; the run goes on.
   */
  private void mark() {
    Pending done = pending;
    pending = null;
    if (!done.plan.listing().incremental || (done.taken == 0 && !done.plan.full())) {
      return;
    }
    try {
      index.recordListing(Listing.after(index.marks(), lister.root(), done.plan, done.highest));
      marked = true;
    } catch (IOException | RuntimeException e) {
      org.slf4j.LoggerFactory.getLogger(IndexedFileSource.class).warn("sluice: the listing's marks in "
          + metadataPath + " were not written (the next listing reads from the older ones): " + e);
    }
  }

  private Listing.Plan plan() {
    try {
      return layout.listing.plan(index.marks(), lister.root(), System.currentTimeMillis());
    } catch (IOException e) {
      throw new UncheckedIOException("the listing's marks in " + metadataPath + " cannot be read: " + e, e);
    }
  }

  private List<FileEntry> listNew() {
    Listed handed = HANDED.remove(DiscoveryIndex.key(metadataPath));
    if (handed != null && listings == 0 && handed.latestBatch() == index.latestBatch()
        && handed.path().equals(layout.path) && java.util.Objects.equals(handed.pathGlobFilter(),
            layout.pathGlobFilter) && handed.plan().listing().equals(layout.listing)) {
      List<FileEntry> found = new ArrayList<>();
      for (FileEntry f : handed.files()) {
        if (!index.contains(f.key())) {
          found.add(f);
        }
      }
      backlogBefore = backlog(found);
      backlogBefore.put("listing_ms", handed.ms());
      listMs += handed.ms();
      listings++;
      lister.listRequests += handed.requests();
      listedBefore = true;
      firstPlan = handed.plan();
      pending = new Pending(handed.plan(), handed.highest());
      return found;
    }
    long start = System.nanoTime();
    Listing.Plan plan = plan();
    if (firstPlan == null) {
      firstPlan = plan;
    }
    try {
      List<FileEntry> found = lister.startAfter(plan.startAfter()).list(key -> !index.contains(key));
      pending = new Pending(plan, lister.highest);
      if (backlogBefore == null) {
        backlogBefore = backlog(found);
        backlogBefore.put("listing_ms", (System.nanoTime() - start) / 1_000_000);
      }
      return found;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list the source folder " + layout.path + ": " + e, e);
    } finally {
      listMs += (System.nanoTime() - start) / 1_000_000;
      listings++;
    }
  }

  @Override
  public Dataset<Row> getBatch(Option<Offset> start, Offset end) {
    long from = start.isDefined() ? FileStreamSourceOffset.apply(start.get()).logOffset() + 1 : 0;
    long to = FileStreamSourceOffset.apply(end).logOffset();
    // read when the batch is planned: the batch Spark asks for again at a restart, and drops, costs nothing
    java.util.function.Supplier<List<FileEntry>> files = () -> {
      synchronized (this) {
        try {
          return index.batches(from, to);
        } catch (IOException e) {
          throw new UncheckedIOException("sluice's discovery index in " + metadataPath + " cannot be read: " + e, e);
        } finally {
          report();
        }
      }
    };
    return org.apache.spark.sql.classic.Dataset.ofRows(spark,
        LogicalRelation$.MODULE$.apply(layout.relation(spark, files, layout.path + " batches " + from + "-" + to),
            true));
  }

  @Override
  public void stop() {}

  @Override
  public String toString() {
    return "IndexedFileSource[" + layout.path + "]";
  }

  private void report() {
    ObjectNode r = JSON.createObjectNode();
    r.put("discovery", "index");
    r.put("files_indexed", index.size());
    r.put("new_files", found);
    r.put("restored_from_log", index.restoredFromLog());
    r.put("restore_ms", restoreMs);
    r.put("listings", listings);
    r.put("listing_ms", listMs);
    r.put("list_requests", lister.listRequests);
    r.put("batch_lists_read", index.listsRead() - listsReadAtStart);
    r.put("listed_before_query", listedBefore);
    if (firstPlan != null) {
      r.put("listing", firstPlan.full() ? "full" : "incremental");
      r.put("start_after", firstPlan.startAfter());
      r.put("listing_why", firstPlan.why());
      r.put("marks_written", marked);
    }
    if (backlogBefore != null) {
      r.set("backlog_before", backlogBefore);
    }
    REPORTS.put(DiscoveryIndex.key(metadataPath), r.toString());
  }
}
