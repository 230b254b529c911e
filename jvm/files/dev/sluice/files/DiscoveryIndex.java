package dev.sluice.files;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.io.OutputStreamWriter;
import java.io.BufferedOutputStream;
import java.io.BufferedInputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.runtime.CompactibleFileStreamLog$;

/**
 * What a pipeline's file source has discovered, kept in its checkpoint folder ({@code sources/0}).
 *
 * <ul>
 *   <li>The log of Spark's own file source, in its form and layout, so that every reader of that log (and
 *       Spark's file source itself, {@code source.discovery: spark}) reads this one: {@code <batch>}, the
 *       files of one batch ({@code v1}, then a JSON line {@code {"path","timestamp","batchId"}} a file, here
 *       with the file's {@code size} too), and every {@code compactInterval} batches {@code <batch>.compact},
 *       which holds every file up to it. Each is written once, whole or absent, before the batch's offset is:
 *       a restarted query reads a batch's files from it. A compact file is written by copying the previous one
 *       line by line (no entry is held in memory); it is never read at a start.</li>
 *   <li>{@code index/seen-<batch>}: every file discovered through that batch, as sorted 128-bit digests of
 *       its path with its modification time (24 bytes a file), written with each compact file (or after
 *       {@link #SNAPSHOT_FILES} files). A run reads the latest one and the few batch files after it, never the
 *       whole history as text.</li>
 * </ul>
 *
 * A checkpoint written by Spark's file source has the same log: it is read once (the latest compact file and
 * the batch files after it) into a snapshot and continued.
 */
final class DiscoveryIndex {
  static final String VERSION = "v1";
  static final String INDEX = "index";
  static final String SNAPSHOT = "seen-";
  /** A snapshot also once this many files were discovered since the last one. */
  static final int SNAPSHOT_FILES = 10_000;
  private static final byte[] MAGIC = "SLUICEIX1".getBytes(StandardCharsets.US_ASCII);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final Path folder;
  private final FileSystem fs;
  private final CheckpointFileManager files;
  private long[] hi = new long[0];
  private long[] lo = new long[0];
  private long[] mt = new long[0];
  private final Map<Digest, Long> added = new HashMap<>();
  private long snapshotBatch = -1;
  private long latest = -1;
  private int restoredFromLog;
  /** The file lists this run wrote, by batch: the batch a query plans next is the one it just added. */
  private final Map<Long, List<FileEntry>> recent = new java.util.LinkedHashMap<>() {
    @Override
    protected boolean removeEldestEntry(Map.Entry<Long, List<FileEntry>> eldest) {
      return size() > 2;
    }
  };
  private int listsRead;

  private Listing.Marks marks;

  private int compactInterval;
  private long latestCompact = -1;

  /** Nothing is written: a log of Spark's file source is read without a snapshot made of it. */
  private final boolean readOnly;

  DiscoveryIndex(String metadataPath, Configuration conf, int compactInterval) throws IOException {
    this(metadataPath, conf, compactInterval, false);
  }

  /** The index as it is, to be read, never written (a check, a dry run's). */
  static DiscoveryIndex readOnly(String metadataPath, Configuration conf, int compactInterval) throws IOException {
    return new DiscoveryIndex(metadataPath, conf, compactInterval, true);
  }

  private DiscoveryIndex(String metadataPath, Configuration conf, int compactInterval, boolean readOnly)
      throws IOException {
    this.readOnly = readOnly;
    this.compactInterval = compactInterval;
    this.folder = new Path(metadataPath);
    this.fs = folder.getFileSystem(conf);
    this.files = CheckpointFileManager.create(folder, conf);
    restore();
  }

  /** The marks of the incremental listing ({@link Listing}), read once. */
  Listing.Marks marks() throws IOException {
    if (marks == null) {
      marks = Listing.read(files, new Path(folder, INDEX));
    }
    return marks;
  }

  /**
   * Replaces the listing's marks: called once the new files of the listing they describe are all in batch lists
   * written before (a kill in between leaves the older marks, whose listing reads more).
   */
  void recordListing(Listing.Marks next) throws IOException {
    if (readOnly) {
      throw new IllegalStateException("the discovery index in " + folder + " was opened to be read only");
    }
    Listing.write(files, new Path(folder, INDEX), next);
    marks = next;
  }

  /** The last batch that has a file list (-1: none). */
  long latestBatch() {
    return latest;
  }

  /** How many files this run read from text batch files (not from a snapshot) when it started. */
  int restoredFromLog() {
    return restoredFromLog;
  }

  int size() {
    return hi.length + added.size();
  }

  /** How many log files (batch lists, compact files) were read for batches' files, at the start included. */
  int listsRead() {
    return listsRead;
  }

  boolean contains(String key) {
    Digest d = Digest.of(key);
    if (added.containsKey(d)) {
      return true;
    }
    return find(d.hi, d.lo) >= 0;
  }

  /** The modification time the file had when it was found (ms), or null: not found before. */
  Long mtimeOf(String key) {
    Digest d = Digest.of(key);
    Long m = added.get(d);
    if (m != null) {
      return m;
    }
    int i = find(d.hi, d.lo);
    return i >= 0 ? mt[i] : null;
  }

  private int find(long h, long l) {
    int low = 0;
    int high = hi.length - 1;
    while (low <= high) {
      int mid = (low + high) >>> 1;
      int c = compare(hi[mid], lo[mid], h, l);
      if (c < 0) {
        low = mid + 1;
      } else if (c > 0) {
        high = mid - 1;
      } else {
        return mid;
      }
    }
    return -1;
  }

  private static int compare(long h1, long l1, long h2, long l2) {
    int c = Long.compare(h1, h2);
    return c != 0 ? c : Long.compare(l1, l2);
  }

  /**
   * Records a new batch: its file list (or, at a compaction batch, the compact file) is written whole or not
   * at all before this returns; a snapshot follows each compact file.
   */
  long add(List<FileEntry> batchFiles) throws IOException {
    if (readOnly) {
      throw new IllegalStateException("the discovery index in " + folder + " was opened to be read only");
    }
    long batch = latest + 1;
    if (batch == 0) {
      files.mkdirs(folder);
    }
    boolean compact = CompactibleFileStreamLog$.MODULE$.isCompactionBatch(batch, compactInterval);
    Path target = new Path(folder, batch + (compact ? ".compact" : ""));
    if (files.exists(target)) {
      throw new IllegalStateException("the discovery index already has batch " + batch + " (" + target
          + "): another query writes this checkpoint at the same time");
    }
    CheckpointFileManager.CancellableFSDataOutputStream out = files.createAtomic(target, false);
    try {
      Writer w = new OutputStreamWriter(new BufferedOutputStream(out, 1 << 16), StandardCharsets.UTF_8);
      w.write(VERSION);
      if (compact) {
        copyEntriesBefore(batch, w);
      }
      for (FileEntry e : batchFiles) {
        ObjectNode line = JSON.createObjectNode();
        line.put("path", e.path);
        line.put("timestamp", e.mtime);
        line.put("batchId", batch);
        line.put("size", e.size); // sluice's: Spark's file source reads the line without it
        w.write('\n');
        w.write(JSON.writeValueAsString(line));
      }
      w.flush();
      out.close();
    } catch (IOException | RuntimeException e) {
      out.cancel();
      throw e;
    }
    latest = batch;
    if (compact) {
      latestCompact = batch;
    }
    recent.put(batch, List.copyOf(batchFiles));
    for (FileEntry e : batchFiles) {
      added.put(Digest.of(e.key()), e.mtime);
    }
    if (compact || added.size() >= SNAPSHOT_FILES) {
      snapshot();
    }
    return batch;
  }

  /** Copies the lines of every batch before {@code batch} (the last compact file, the lists after it). */
  private void copyEntriesBefore(long batch, Writer w) throws IOException {
    long from = 0;
    if (latestCompact >= 0) {
      copyLines(new Path(folder, latestCompact + ".compact"), w);
      from = latestCompact + 1;
    }
    for (long b = from; b < batch; b++) {
      copyLines(new Path(folder, Long.toString(b)), w);
    }
  }

  private void copyLines(Path p, Writer w) throws IOException {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(files.open(p), StandardCharsets.UTF_8))) {
      r.readLine(); // the version
      String line;
      while ((line = r.readLine()) != null) {
        if (!line.isBlank()) {
          w.write('\n');
          w.write(line);
        }
      }
    }
  }

  /** The files of batches {@code from..to} (inclusive), as their log records them. */
  List<FileEntry> batches(long from, long to) throws IOException {
    List<FileEntry> out = new ArrayList<>();
    Map<Long, Path> compacts = null;
    for (long b = from; b <= to; b++) {
      List<FileEntry> known = recent.get(b);
      if (known != null) {
        for (FileEntry e : known) {
          out.add(new FileEntry(e.path, e.key(), e.mtime, e.size, b));
        }
        continue;
      }
      Path p = new Path(folder, Long.toString(b));
      if (files.exists(p)) {
        out.addAll(read(p, -1));
        continue;
      }
      if (compacts == null) {
        compacts = compactFiles();
      }
      Map.Entry<Long, Path> c = ((TreeMap<Long, Path>) compacts).ceilingEntry(b);
      if (c == null) {
        throw new IllegalStateException("the discovery index has no file list for batch " + b + " in " + folder
            + ": the checkpoint is incomplete");
      }
      out.addAll(read(c.getValue(), b));
    }
    return out;
  }

  private Map<Long, Path> compactFiles() throws IOException {
    TreeMap<Long, Path> out = new TreeMap<>();
    for (FileStatus s : listOrEmpty(folder)) {
      String name = s.getPath().getName();
      if (name.endsWith(".compact")) {
        try {
          out.put(Long.parseLong(name.substring(0, name.length() - ".compact".length())), s.getPath());
        } catch (NumberFormatException ignored) {
          // not a log file
        }
      }
    }
    return out;
  }

  private FileStatus[] listOrEmpty(Path p) throws IOException {
    try {
      return fs.listStatus(p);
    } catch (java.io.FileNotFoundException e) {
      return new FileStatus[0];
    }
  }

  /** A log file's entries; {@code onlyBatch} >= 0 keeps that batch's (a compact file holds many). */
  private List<FileEntry> read(Path p, long onlyBatch) throws IOException {
    listsRead++;
    List<FileEntry> out = new ArrayList<>();
    try (BufferedReader r = new BufferedReader(new InputStreamReader(files.open(p), StandardCharsets.UTF_8))) {
      String version = r.readLine();
      if (version == null || !version.startsWith("v")) {
        throw new IOException("not a file source log: " + p);
      }
      String line;
      while ((line = r.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        JsonNode n = JSON.readTree(line);
        long batch = n.path("batchId").asLong(-1);
        if (onlyBatch >= 0 && batch != onlyBatch) {
          continue;
        }
        out.add(new FileEntry(n.get("path").asText(), null, n.path("timestamp").asLong(0), n.path("size").asLong(-1),
            batch));
      }
    }
    return out;
  }

  private void restore() throws IOException {
    List<Long> batches = new ArrayList<>();
    for (FileStatus s : listOrEmpty(folder)) {
      String name = s.getPath().getName();
      try {
        if (name.endsWith(".compact")) {
          latestCompact = Math.max(latestCompact, Long.parseLong(name.substring(0, name.length() - 8)));
        } else {
          batches.add(Long.parseLong(name));
        }
      } catch (NumberFormatException ignored) {
        // the index folder, temporary files
      }
    }
    for (long b : batches) {
      latest = Math.max(latest, b);
    }
    latest = Math.max(latest, latestCompact);
    if (latestCompact >= 0) { // the interval the log was written with (Spark's own rule)
      compactInterval = CompactibleFileStreamLog$.MODULE$.deriveCompactInterval(compactInterval,
          (int) latestCompact);
    }
    long snap = -1;
    for (FileStatus s : listOrEmpty(new Path(folder, INDEX))) {
      String name = s.getPath().getName();
      if (name.startsWith(SNAPSHOT)) {
        try {
          long b = Long.parseLong(name.substring(SNAPSHOT.length()));
          if (b <= latest) {
            snap = Math.max(snap, b);
          }
        } catch (NumberFormatException ignored) {
          // a temporary file
        }
      }
    }
    List<FileEntry> tail = new ArrayList<>();
    boolean migrated = false;
    if (snap >= 0) {
      readSnapshot(new Path(new Path(folder, INDEX), SNAPSHOT + snap));
      snapshotBatch = snap;
      tail.addAll(batches(snap + 1, latest));
    } else if (latestCompact >= 0) { // a log without a snapshot: Spark's file source wrote it
      tail.addAll(read(new Path(folder, latestCompact + ".compact"), -1));
      tail.addAll(batches(latestCompact + 1, latest));
      migrated = true;
    } else {
      tail.addAll(batches(0, latest));
    }
    restoredFromLog = tail.size();
    for (FileEntry e : tail) {
      added.put(Digest.of(e.key()), e.mtime);
    }
    if (!readOnly && latest >= 0 && (migrated || tail.size() >= SNAPSHOT_FILES)) {
      snapshot(); // the log's text is read this once
    }
  }

  private void readSnapshot(Path p) throws IOException {
    try (DataInputStream in = new DataInputStream(new BufferedInputStream(files.open(p), 1 << 16))) {
      byte[] magic = new byte[MAGIC.length];
      in.readFully(magic);
      if (!Arrays.equals(magic, MAGIC)) {
        throw new IOException("not a sluice discovery index: " + p);
      }
      int n = in.readInt();
      hi = new long[n];
      lo = new long[n];
      mt = new long[n];
      for (int i = 0; i < n; i++) {
        hi[i] = in.readLong();
        lo[i] = in.readLong();
        mt[i] = in.readLong(); // kept for a rewritten-file check
      }
    }
  }

  /** Folds what was added into a new snapshot of every file discovered through the latest batch. */
  private void snapshot() throws IOException {
    int n = hi.length + added.size();
    long[][] rows = new long[n][];
    int i = 0;
    for (; i < hi.length; i++) {
      rows[i] = new long[] {hi[i], lo[i], mt[i]};
    }
    for (Map.Entry<Digest, Long> e : added.entrySet()) {
      rows[i++] = new long[] {e.getKey().hi, e.getKey().lo, e.getValue()};
    }
    Arrays.sort(rows, (a, b) -> compare(a[0], a[1], b[0], b[1]));
    Path target = new Path(new Path(folder, INDEX), SNAPSHOT + latest);
    files.mkdirs(target.getParent());
    CheckpointFileManager.CancellableFSDataOutputStream out = files.createAtomic(target, true);
    try {
      DataOutputStream d = new DataOutputStream(new BufferedOutputStream(out, 1 << 16));
      d.write(MAGIC);
      d.writeInt(n);
      long[] nh = new long[n];
      long[] nl = new long[n];
      long[] nm = new long[n];
      for (int j = 0; j < n; j++) {
        d.writeLong(rows[j][0]);
        d.writeLong(rows[j][1]);
        d.writeLong(rows[j][2]);
        nh[j] = rows[j][0];
        nl[j] = rows[j][1];
        nm[j] = rows[j][2];
      }
      d.flush();
      out.close();
      hi = nh;
      lo = nl;
      mt = nm;
      added.clear();
    } catch (IOException | RuntimeException e) {
      out.cancel();
      throw e;
    }
    long previous = snapshotBatch;
    snapshotBatch = latest;
    if (previous >= 0) { // the one before stays for a reader that listed before this one was written
      for (FileStatus s : listOrEmpty(new Path(folder, INDEX))) {
        String name = s.getPath().getName();
        if (name.startsWith(SNAPSHOT)) {
          try {
            if (Long.parseLong(name.substring(SNAPSHOT.length())) < previous) {
              files.delete(s.getPath());
            }
          } catch (NumberFormatException ignored) {
            // a temporary file
          }
        }
      }
    }
  }

  /** One spelling of a file's location for every way of writing it (file:/a, file:///a, an encoded %20). */
  static String key(String uriString) {
    try {
      URI u = new URI(uriString);
      String scheme = u.getScheme() == null ? "file" : u.getScheme();
      String authority = u.getAuthority() == null ? "" : u.getAuthority();
      return scheme + "://" + authority + u.getPath();
    } catch (URISyntaxException e) {
      return uriString;
    }
  }

  /** A path's 128-bit digest (MD5: collisions are out of reach at any count of files). */
  static final class Digest {
    final long hi;
    final long lo;

    private Digest(long hi, long lo) {
      this.hi = hi;
      this.lo = lo;
    }

    private static final ThreadLocal<MessageDigest> MD5 = ThreadLocal.withInitial(() -> {
      try {
        return MessageDigest.getInstance("MD5");
      } catch (NoSuchAlgorithmException e) {
        throw new IllegalStateException(e);
      }
    });

    static Digest of(String key) {
      byte[] b = MD5.get().digest(key.getBytes(StandardCharsets.UTF_8)); // digest() resets it for the next
      long h = 0;
      long l = 0;
      for (int i = 0; i < 8; i++) {
        h = (h << 8) | (b[i] & 0xff);
        l = (l << 8) | (b[i + 8] & 0xff);
      }
      return new Digest(h, l);
    }

    @Override
    public boolean equals(Object o) {
      return o instanceof Digest && ((Digest) o).hi == hi && ((Digest) o).lo == lo;
    }

    @Override
    public int hashCode() {
      return Long.hashCode(hi) * 31 + Long.hashCode(lo);
    }
  }
}
