package dev.sluice.files;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

/**
 * Which names of the source folder a listing reads ({@code source.listing}).
 *
 * <ul>
 *   <li>{@code full}: every name, each run.</li>
 *   <li>{@code incremental}: only the names that sort after a high-water mark, as an object store's
 *       {@code ListObjectsV2} with {@code StartAfter} reads them (one request for the tail of a folder of any
 *       size). The mark is the highest name that listings which started at least {@code look_back} before this
 *       one had seen, once every new file those listings found was in the index. A file landing late with a
 *       name below it is found by the next <em>full</em> listing, which a run makes when the last one is
 *       {@code full_listing_every} old (or there is no mark old enough): late, never lost.</li>
 * </ul>
 *
 * <p>Names are compared as an object store orders keys: by their code points (UTF-8's byte order), as paths
 * below the source folder ({@code date=2026-12-06/part-0001.json}).
 *
 * <p>The marks live in the index's folder ({@code sources/0/index/marks}), one small JSON file, replaced whole
 * after the batch list of what its listing found is written: a run killed in between leaves the older marks,
 * whose listing reads more names, not fewer.
 */
final class Listing {
  static final String OPTION = "sluice.listing";
  static final String MARKS = "marks";
  /** Marks kept: one a listing that found new files, or a full one; the oldest go first (a full listing then). */
  static final int KEEP = 2_000;
  private static final ObjectMapper JSON = new ObjectMapper();

  static final Listing FULL = new Listing(false, 0, 0);

  final boolean incremental;
  final long lookBackMs;
  final long fullEveryMs;

  private Listing(boolean incremental, long lookBackMs, long fullEveryMs) {
    this.incremental = incremental;
    this.lookBackMs = lookBackMs;
    this.fullEveryMs = fullEveryMs;
  }

  /** {@code full}, or {@code incremental,<look back ms>,<full listing every ms>} (null: full). */
  static Listing parse(String text) {
    if (text == null || text.isBlank() || text.trim().equals("full")) {
      return FULL;
    }
    String[] parts = text.trim().split(",");
    if (parts.length != 3 || !parts[0].equals("incremental")) {
      throw new IllegalArgumentException("option " + OPTION + " is full or incremental,<look back ms>,<full listing "
          + "every ms>, not " + text);
    }
    long lookBack = Long.parseLong(parts[1].trim());
    long every = Long.parseLong(parts[2].trim());
    if (lookBack < 0 || every <= 0) {
      throw new IllegalArgumentException("option " + OPTION + ": look back >= 0 and full listing every > 0 ms: " + text);
    }
    return new Listing(true, lookBack, every);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Listing l && l.incremental == incremental && l.lookBackMs == lookBackMs
        && l.fullEveryMs == fullEveryMs;
  }

  @Override
  public int hashCode() {
    return Boolean.hashCode(incremental) * 31 + Long.hashCode(lookBackMs) * 7 + Long.hashCode(fullEveryMs);
  }

  /**
   * What one listing reads: {@code startAfter} null for every name; {@code why} says which rule chose it (the
   * run's report).
   */
  record Plan(Listing listing, String startAfter, long startedMs, String why) {
    boolean full() {
      return startAfter == null;
    }
  }

  /** The marks a folder's index holds: the folder listed, when the last full listing started, and the marks. */
  record Marks(String root, long fullMs, List<Long> times, List<String> names) {
    static final Marks NONE = new Marks(null, -1, List.of(), List.of());

    String highest() {
      return names.isEmpty() ? null : names.get(names.size() - 1);
    }
  }

  /** The plan of a listing of {@code root} starting at {@code now}, from the marks the index holds. */
  Plan plan(Marks marks, String root, long now) {
    if (!incremental) {
      return new Plan(this, null, now, "listing: full");
    }
    if (marks.root() == null || marks.names().isEmpty()) {
      return new Plan(this, null, now, "the first listing: no mark yet");
    }
    if (!marks.root().equals(root)) {
      return new Plan(this, null, now, "the source folder is not the one the marks were made for (" + marks.root()
          + ")");
    }
    if (marks.fullMs() < 0 || now - marks.fullMs() >= fullEveryMs) {
      return new Plan(this, null, now, "a full listing is due (full_listing_every)");
    }
    String after = null;
    for (int i = marks.names().size() - 1; i >= 0; i--) {
      if (marks.times().get(i) <= now - lookBackMs) {
        after = marks.names().get(i);
        break;
      }
    }
    if (after == null) {
      return new Plan(this, null, now, "no mark is look_back old yet");
    }
    return new Plan(this, after, now, "after the mark of a listing look_back old or more");
  }

  static Marks read(CheckpointFileManager files, Path indexFolder) throws IOException {
    Path p = new Path(indexFolder, MARKS);
    if (!files.exists(p)) {
      return Marks.NONE;
    }
    JsonNode n;
    try (InputStream in = files.open(p)) {
      n = JSON.readTree(in);
    }
    List<Long> times = new ArrayList<>();
    List<String> names = new ArrayList<>();
    for (JsonNode m : n.path("marks")) {
      times.add(m.get(0).asLong());
      names.add(m.get(1).asText());
    }
    return new Marks(n.path("root").asText(null), n.path("full_ms").asLong(-1), times, names);
  }

  /**
   * The marks after a listing of {@code root} by {@code plan} whose new files are all in the index: its start
   * and the highest name it saw (never lower than the last mark: names only rise), and the full listing's start.
   */
  static Marks after(Marks marks, String root, Plan plan, String highestListed) {
    boolean same = root.equals(marks.root());
    List<Long> times = new ArrayList<>(same ? marks.times() : List.of());
    List<String> names = new ArrayList<>(same ? marks.names() : List.of());
    String highest = names.isEmpty() ? null : names.get(names.size() - 1);
    if (highestListed != null && (highest == null || compare(highestListed, highest) > 0)) {
      highest = highestListed;
    }
    if (highest != null) {
      times.add(plan.startedMs());
      names.add(highest);
    }
    while (times.size() > KEEP) {
      times.remove(0);
      names.remove(0);
    }
    long full = plan.full() ? plan.startedMs() : (same ? marks.fullMs() : -1);
    return new Marks(root, full, times, names);
  }

  static void write(CheckpointFileManager files, Path indexFolder, Marks marks) throws IOException {
    ObjectNode n = JSON.createObjectNode();
    n.put("root", marks.root());
    n.put("full_ms", marks.fullMs());
    ArrayNode a = n.putArray("marks");
    for (int i = 0; i < marks.names().size(); i++) {
      ArrayNode m = a.addArray();
      m.add(marks.times().get(i));
      m.add(marks.names().get(i));
    }
    files.mkdirs(indexFolder);
    CheckpointFileManager.CancellableFSDataOutputStream out = files.createAtomic(new Path(indexFolder, MARKS), true);
    try {
      out.write(JSON.writeValueAsString(n).getBytes(StandardCharsets.UTF_8));
      out.close();
    } catch (IOException | RuntimeException e) {
      out.cancel();
      throw e;
    }
  }

  /** Why a path with a glob cannot be listed after a mark, and what to do. */
  static String globRefused(String path) {
    return "source.listing: incremental lists one folder's names after a mark; the path " + path + " is a glob: "
        + "give the folder as source.path and keep files by name with options.pathGlobFilter, or set "
        + "source.listing: full";
  }

  /** Two names in an object store's order: by code point (UTF-8's byte order), not by UTF-16 unit. */
  static int compare(String a, String b) {
    int i = 0;
    int j = 0;
    while (i < a.length() && j < b.length()) {
      int ca = a.codePointAt(i);
      int cb = b.codePointAt(j);
      if (ca != cb) {
        return Integer.compare(ca, cb);
      }
      i += Character.charCount(ca);
      j += Character.charCount(cb);
    }
    return Integer.compare(a.length() - i, b.length() - j);
  }

  /**
   * Whether no name inside the folder {@code folder} (a name below the root, without a trailing slash) sorts
   * after {@code startAfter}: the folder need not be read.
   */
  static boolean folderBefore(String folder, String startAfter) {
    String prefix = folder + "/";
    return compare(prefix, startAfter) < 0 && !startAfter.startsWith(prefix);
  }
}
