package dev.sluice.files;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Predicate;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.GlobFilter;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.util.HadoopFSUtils;

/**
 * Lists the files under a source path that a predicate calls new, the way Spark's file source finds them
 * (globs in the path, every level of sub-folders, hidden names skipped: {@code _x}, {@code .x},
 * {@code x._COPYING_}; {@code pathGlobFilter} on file names), at the cost of the new files:
 *
 * <ul>
 *   <li>on a local disk, names are read first and only a name the predicate calls new is looked at
 *       ({@code stat}): a folder of 100,000 known files costs its names;</li>
 *   <li>elsewhere (a bucket, HDFS), one recursive listing, which an object store answers with 1,000 objects
 *       a request, their sizes and times included.</li>
 * </ul>
 */
final class Lister {
  static final Comparator<FileEntry> BY_TIME =
      Comparator.<FileEntry>comparingLong(f -> f.mtime).thenComparing(f -> f.path);

  private final Path pattern;
  private final FileSystem fs;
  private final GlobFilter nameFilter;
  private final boolean glob;
  /**
   * What the listings asked of the file system: on a local disk, the folders read; in a bucket, the LIST
   * requests its client counted while listing (S3A's {@code object_list_request} and, for each page after a
   * listing's first, {@code object_continue_list_request}), else the listing calls.
   */
  long listRequests;
  /**
   * The files {@link #changed} found that the recorded times do not know (found since, not ingested yet), oldest
   * first: what {@link #list} would call new against the same record.
   */
  final List<FileEntry> unseen = new ArrayList<>();
  /**
   * The listing's high-water mark ({@link Listing}): only names below the folder that sort after it are read;
   * null, every name.
   */
  private String startAfter;
  /** The highest name below the folder of a file the last listing saw (new or known), or null: none. */
  String highest;

  Lister(String path, Configuration conf, String pathGlobFilter) throws IOException {
    Path p = new Path(path);
    this.fs = p.getFileSystem(conf);
    this.pattern = fs.makeQualified(p);
    this.nameFilter = pathGlobFilter == null ? null : new GlobFilter(pathGlobFilter);
    this.glob = org.apache.spark.deploy.SparkHadoopUtil.get().isGlobPath(p);
  }

  /** The folder listed, as its marks name it ({@link Listing.Marks#root}). */
  String root() {
    return pattern.toString();
  }

  /**
   * Lists only the names after {@code name} from now on (null: every name). A path with a glob has no one
   * folder whose names sort: refused.
   */
  Lister startAfter(String name) {
    if (name != null && glob) {
      throw new IllegalArgumentException(Listing.globRefused(pattern.toString()));
    }
    this.startAfter = name;
    return this;
  }

  /** Whether {@code fs} is S3A's (or a subclass), told by class name: a run without S3A loads none of it. */
  private static boolean onS3A(FileSystem fs) {
    for (Class<?> c = fs.getClass(); c != null; c = c.getSuperclass()) {
      if (c.getName().equals("org.apache.hadoop.fs.s3a.S3AFileSystem")) {
        return true;
      }
    }
    return false;
  }

  /** Keeps {@code name} (below the folder, of a file listed) as {@link #highest} when it sorts after it. */
  private void saw(String name) {
    if (highest == null || Listing.compare(name, highest) > 0) {
      highest = name;
    }
  }

  /** Whether a name below the folder sorts after the mark (always, without one). */
  private boolean afterMark(String name) {
    return startAfter == null || Listing.compare(name, startAfter) > 0;
  }

  /**
   * Whether the folder is walked on a local disk (no glob): {@link #list} then reads names before it looks at a
   * file, so a listing of the new files is cheaper than {@link #changed}'s, which looks at every file; elsewhere
   * both are one listing.
   */
  boolean walksLocalDisk() {
    return "file".equals(fs.getUri().getScheme()) && !glob;
  }

  /** Every file the predicate (given a file's key) calls new, oldest first. */
  List<FileEntry> list(Predicate<String> isNew) throws IOException {
    List<FileEntry> out = new ArrayList<>();
    boolean local = "file".equals(fs.getUri().getScheme());
    long counted = storeListRequests();
    highest = null;
    try {
      list(isNew, local, out);
    } finally {
      long now = storeListRequests();
      if (!local && counted >= 0 && now >= counted) {
        listRequests += now - counted;
      } else if (!local) {
        listRequests += 1;
      }
    }
    out.sort(BY_TIME);
    return out;
  }

  /**
   * This file system's own count of LIST requests, or -1. Not {@code getStorageStatistics()}: S3A registers
   * those once a JVM, bound to the first S3A instance made, so another bucket's client would be read.
   */
  private long storeListRequests() {
    org.apache.hadoop.fs.statistics.IOStatistics stats =
        org.apache.hadoop.fs.statistics.IOStatisticsSupport.retrieveIOStatistics(fs);
    Long first = stats == null ? null : stats.counters().get("object_list_request");
    Long more = stats == null ? null : stats.counters().get("object_continue_list_request");
    return first == null ? -1 : first + (more == null ? 0 : more);
  }

  private void list(Predicate<String> isNew, boolean local, List<FileEntry> out) throws IOException {
    if (!local && !glob) { // straight to the recursive listing: a bucket's folder status would cost a LIST too
      try {
        listRemote(pattern, isNew, out);
      } catch (java.io.FileNotFoundException nothingYet) {
        // no object under the path
      }
      return;
    }
    FileStatus[] roots = fs.globStatus(pattern);
    if (roots == null) {
      return;
    }
    for (FileStatus root : roots) {
      if (root.isFile()) {
        add(root.getPath(), root.getModificationTime(), root.getLen(), isNew, out);
      } else if (local) {
        walk(java.nio.file.Paths.get(root.getPath().toUri()), isNew, out);
      } else {
        listRemote(root.getPath(), isNew, out);
      }
    }
  }

  /** The first file under the path (any one), or null: the partition folders a file sits in. */
  String anyFile() throws IOException {
    FileStatus[] roots = fs.globStatus(pattern);
    if (roots == null) {
      return null;
    }
    boolean local = "file".equals(fs.getUri().getScheme());
    for (FileStatus root : roots) {
      if (root.isFile()) {
        return SparkPath.fromPath(root.getPath()).urlEncoded();
      }
      String found = local ? anyLocal(java.nio.file.Paths.get(root.getPath().toUri())) : anyRemote(root.getPath());
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private String anyLocal(java.nio.file.Path dir) throws IOException {
    List<java.nio.file.Path> folders = new ArrayList<>();
    try (DirectoryStream<java.nio.file.Path> names = Files.newDirectoryStream(dir)) {
      for (java.nio.file.Path p : names) {
        if (HadoopFSUtils.shouldFilterOutPathName(p.getFileName().toString())) {
          continue;
        }
        BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class);
        Path hp = new Path(p.toUri());
        if (a.isRegularFile() && (nameFilter == null || nameFilter.accept(hp))) {
          return SparkPath.fromPath(hp).urlEncoded();
        }
        if (a.isDirectory()) {
          folders.add(p);
        }
      }
    } catch (NoSuchFileException gone) {
      return null;
    }
    for (java.nio.file.Path folder : folders) {
      String found = anyLocal(folder);
      if (found != null) {
        return found;
      }
    }
    return null;
  }

  private String anyRemote(Path root) throws IOException {
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(root, true);
    int depth = root.depth();
    while (it.hasNext()) {
      Path p = it.next().getPath();
      if (!hidden(p, depth) && (nameFilter == null || nameFilter.accept(p))) {
        return SparkPath.fromPath(p).urlEncoded();
      }
    }
    return null;
  }

  /** What a walk keeps of a regular file it looked at: an entry, or null. */
  private interface Take {
    FileEntry take(java.nio.file.Path p, String key, BasicFileAttributes a);
  }

  private void walk(java.nio.file.Path dir, Predicate<String> isNew, List<FileEntry> out) throws IOException {
    walk(dir, "", isNew, (p, key, a) -> entry(p, key, a.lastModifiedTime().toMillis(), a.size()), out);
  }

  /**
   * A local folder's tree, each name {@code look} calls worth it looked at ({@code stat}), every level; with a
   * mark ({@link #startAfter}), a name that sorts before it is skipped unread, and so is a folder all of whose
   * names do. {@code below}: the folder's name below the listed one ("" for it).
   */
  private void walk(java.nio.file.Path dir, String below, Predicate<String> look, Take take, List<FileEntry> out)
      throws IOException {
    listRequests++;
    List<java.nio.file.Path> folders = new ArrayList<>();
    List<String> folderNames = new ArrayList<>();
    try (DirectoryStream<java.nio.file.Path> names = Files.newDirectoryStream(dir)) {
      for (java.nio.file.Path p : names) {
        String name = p.getFileName().toString();
        if (HadoopFSUtils.shouldFilterOutPathName(name)) {
          continue;
        }
        String relative = below.isEmpty() ? name : below + "/" + name;
        boolean maybeFolderOnly = false;
        if (startAfter != null && !afterMark(relative)) {
          if (Listing.folderBefore(relative, startAfter)) {
            continue; // neither it nor, if a folder, any name in it sorts after the mark
          }
          maybeFolderOnly = true; // a file before the mark, or a folder with names after it: looked at
        }
        String key = "file://" + p.toAbsolutePath();
        if (!maybeFolderOnly && !look.test(key)) {
          saw(relative); // a file discovered before: no stat
          continue;
        }
        BasicFileAttributes a;
        try {
          a = Files.readAttributes(p, BasicFileAttributes.class);
        } catch (NoSuchFileException gone) {
          continue;
        }
        if (a.isDirectory()) {
          folders.add(p);
          folderNames.add(relative);
        } else if (a.isRegularFile() && !maybeFolderOnly) {
          if (nameFilter == null || nameFilter.accept(new Path(p.toUri()))) {
            saw(relative);
          }
          FileEntry e = take.take(p, key, a);
          if (e != null) {
            out.add(e);
          }
        }
      }
    } catch (NoSuchFileException gone) {
      return;
    }
    for (int i = 0; i < folders.size(); i++) {
      walk(folders.get(i), folderNames.get(i), look, take, out);
    }
  }

  /** The entry of a local file that passes {@code pathGlobFilter}, or null. */
  private FileEntry entry(java.nio.file.Path p, String key, long mtime, long size) {
    Path hp = new Path(p.toUri());
    return nameFilter == null || nameFilter.accept(hp)
        ? new FileEntry(SparkPath.fromPath(hp).urlEncoded(), key, mtime, size, -1) : null;
  }

  /**
   * The files whose time differs from the one {@code recorded} gives for their key (null: a file not recorded,
   * left out and kept in {@link #unseen}; {@code onUnseen} runs when the first is met), to the millisecond or
   * {@code toTheSecond}. On a local disk without a glob, a walk that makes a file's name into a URL only when it
   * differs or is unseen; elsewhere, the listing of every file.
   */
  List<FileEntry> changed(java.util.function.Function<String, Long> recorded, boolean toTheSecond,
      Runnable onUnseen) throws IOException {
    List<FileEntry> out = new ArrayList<>();
    if (walksLocalDisk()) {
      highest = null;
      walk(java.nio.file.Paths.get(pattern.toUri()), "", key -> true, (p, key, a) -> {
        Long m = recorded.apply(key);
        long mtime = a.lastModifiedTime().toMillis();
        if (m == null) {
          FileEntry e = entry(p, key, mtime, a.size());
          if (e != null) {
            if (unseen.isEmpty()) {
              onUnseen.run();
            }
            unseen.add(e);
          }
          return null;
        }
        return sameTime(m, mtime, toTheSecond) ? null : entry(p, key, mtime, a.size());
      }, out);
      unseen.sort(BY_TIME);
      return out;
    }
    for (FileEntry f : list(key -> true)) {
      Long m = recorded.apply(f.key());
      if (m == null) {
        if (unseen.isEmpty()) {
          onUnseen.run();
        }
        unseen.add(f);
      } else if (!sameTime(m, f.mtime, toTheSecond)) {
        out.add(f);
      }
    }
    return out;
  }

  private static boolean sameTime(long a, long b, boolean toTheSecond) {
    return toTheSecond ? a / 1000 == b / 1000 : a == b;
  }

  private void listRemote(Path root, Predicate<String> isNew, List<FileEntry> out) throws IOException {
    int depth = root.depth();
    String rootPath = root.toUri().getPath();
    int cut = rootPath.endsWith("/") ? rootPath.length() : rootPath.length() + 1;
    if (startAfter != null && onS3A(fs)) { // only the keys after the mark: a request for the tail of the folder
      listRequests += S3Listing.list(fs, root, startAfter, (p, mtime, size) ->
          remote(p, depth, p.toUri().getPath().substring(cut), mtime, size, isNew, out));
      return;
    }
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(root, true);
    while (it.hasNext()) {
      LocatedFileStatus s = it.next();
      Path p = s.getPath();
      remote(p, depth, p.toUri().getPath().substring(cut), s.getModificationTime(), s.getLen(), isNew, out);
    }
  }

  private void remote(Path p, int depth, String relative, long mtime, long size, Predicate<String> isNew,
      List<FileEntry> out) {
    if (!afterMark(relative) || hidden(p, depth) || (nameFilter != null && !nameFilter.accept(p))) {
      return;
    }
    saw(relative);
    String url = SparkPath.fromPath(p).urlEncoded();
    String key = DiscoveryIndex.key(url);
    if (isNew.test(key)) {
      out.add(new FileEntry(url, key, mtime, size, -1));
    }
  }

  private void add(Path p, long mtime, long size, Predicate<String> isNew, List<FileEntry> out) {
    if (HadoopFSUtils.shouldFilterOutPathName(p.getName()) || (nameFilter != null && !nameFilter.accept(p))) {
      return;
    }
    String url = SparkPath.fromPath(p).urlEncoded();
    String key = DiscoveryIndex.key(url);
    if (isNew.test(key)) {
      out.add(new FileEntry(url, key, mtime, size, -1));
    }
  }

  /** A name below the listed folder that Spark's file source skips, at any level. */
  private static boolean hidden(Path p, int rootDepth) {
    for (Path q = p; q != null && q.depth() > rootDepth; q = q.getParent()) {
      if (HadoopFSUtils.shouldFilterOutPathName(q.getName())) {
        return true;
      }
    }
    return false;
  }
}
