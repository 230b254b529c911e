"""A failure in one line (spark_jobs.driver.errors): an object store that stopped answering is named as such, and
only it (a broker refusing a connection is not the store)."""

from __future__ import annotations

from spark_jobs.driver.errors import describe_error, store_unreachable

S3A = ("java.net.ConnectException: getFileStatus on s3a://lake/orders/_delta_log/00000000000000000003.json: "
       "software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: Connect to "
       "127.0.0.1:8333 [/127.0.0.1] failed: Connection refused (SDK Attempt Count: 4)")
ARROW = ("When getting information for key 'checkpoints/orders/offsets' in bucket 'lake': AWS Error "
         "NETWORK_CONNECTION during HeadObject operation: curlCode: 7, Could not connect to server")


def test_a_connection_the_store_refused_names_the_store_and_what_to_do(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    for text in (S3A, ARROW):
        said = store_unreachable(text)
        assert said == (f"object store unreachable at http://127.0.0.1:8333 during the run: {text} -- start the "
                        "store (or fix AWS_ENDPOINT_URL) and run again: nothing after the last committed batch "
                        "was kept, and the next run resumes from the checkpoint, exactly once")
    assert describe_error(OSError(ARROW)).startswith("object store unreachable at http://127.0.0.1:8333 ")


def test_other_failures_are_not_blamed_on_the_store(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8333")
    kafka = "org.apache.kafka.common.errors.TimeoutException: Connection to node 1 (127.0.0.1/127.0.0.1:9092) refused: Connection refused"
    assert store_unreachable(kafka) is None
    # the store answered, with an error of its own: that is said as it is
    denied = "java.nio.file.AccessDeniedException: s3a://lake/orders: getFileStatus: 403 Forbidden"
    assert store_unreachable(denied) is None
    assert describe_error(RuntimeError(denied)) == denied
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # on AWS itself, the endpoint is none of ours: the S3 words say it
    assert store_unreachable(S3A).startswith("object store unreachable at AWS S3 (")
