package dev.sluice.files;

import java.io.IOException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * The objects below a folder of a bucket whose keys sort after a name: {@code ListObjectsV2} with {@code
 * StartAfter}, on S3A's own client (its endpoint, credentials and retries), in S3A's page size
 * ({@code fs.s3a.paging.maximum}). S3A's listing has no such start; this is the one place sluice asks the SDK.
 * Loaded only for a bucket's incremental listing ({@link Lister#onS3A}): a local run has none of the SDK's
 * classes, which this one's verification loads.
 */
final class S3Listing {
  private S3Listing() {}

  /** What the listing hands each object: its path, modification time (ms) and size. */
  interface Each {
    void accept(Path path, long mtime, long size);
  }

  /**
   * Lists the objects below {@code root} whose name below it sorts after {@code startAfter}; returns the LIST
   * requests made.
   */
  static long list(FileSystem fs, Path root, String startAfter, Each each) throws IOException {
    S3AFileSystem s3 = (S3AFileSystem) fs;
    String prefix = s3.pathToKey(root);
    if (!prefix.isEmpty() && !prefix.endsWith("/")) {
      prefix += "/";
    }
    S3Client client = s3.getS3AInternals().getAmazonS3Client("sluice: the listing after a high-water mark");
    int page = Math.max(1, Math.min(1000, fs.getConf().getInt("fs.s3a.paging.maximum", 1000)));
    ListObjectsV2Request.Builder request = ListObjectsV2Request.builder().bucket(s3.getBucket()).prefix(prefix)
        .startAfter(prefix + startAfter).maxKeys(page);
    long requests = 0;
    String token = null;
    do {
      ListObjectsV2Response answer;
      try {
        answer = client.listObjectsV2(request.continuationToken(token).build());
      } catch (software.amazon.awssdk.core.exception.SdkException e) {
        throw new IOException("listing s3a://" + s3.getBucket() + "/" + prefix + " after " + startAfter + ": " + e, e);
      }
      requests++;
      for (S3Object o : answer.contents()) {
        if (o.key().endsWith("/")) {
          continue; // a folder's marker
        }
        each.accept(s3.keyToQualifiedPath(o.key()), o.lastModified().toEpochMilli(), o.size());
      }
      token = Boolean.TRUE.equals(answer.isTruncated()) ? answer.nextContinuationToken() : null;
    } while (token != null);
    return requests;
  }
}
