package dev.sluice.chaos;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;

/**
 * S3A for FileContext (Spark's checkpoint manager writes through it), on {@link HaltingS3AFileSystem}: what
 * Hadoop's org.apache.hadoop.fs.s3a.S3A is for S3AFileSystem.
 */
public class HaltingS3A extends DelegateToFileSystem {
    public HaltingS3A(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(uri, new HaltingS3AFileSystem(), conf, "s3a", false);
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }
}
