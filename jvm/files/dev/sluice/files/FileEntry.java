package dev.sluice.files;

/** A file found by a listing or read from the index's log. */
final class FileEntry {
  /** As Spark's file source log writes it: the URL-encoded URI. */
  final String path;
  final long mtime;
  /** -1: not known (a log of Spark's file source does not record it). */
  final long size;
  /** -1: not in a batch yet. */
  final long batch;
  private String key;

  FileEntry(String path, String key, long mtime, long size, long batch) {
    this.path = path;
    this.key = key;
    this.mtime = mtime;
    this.size = size;
    this.batch = batch;
  }

  /** The index's spelling of the file's location ({@link DiscoveryIndex#key}). */
  String key() {
    if (key == null) {
      key = DiscoveryIndex.key(path);
    }
    return key;
  }
}
