"""Where an object store is and how to sign in: one answer for every client sluice uses on it.

Three clients talk to the store: Hadoop's S3A in the Spark driver (tables, checkpoints, sources), Arrow's S3
file system in sluice's own Python (:class:`sluice.storage.files.Storage`: checkpoints, Delta logs, the lock) and
delta-rs (the ledger, ``sluice status``). They read the same standard AWS variables, resolved here once:

==========================  =========================================================================
``AWS_ENDPOINT_URL_S3``     an S3-compatible store's endpoint (``http://host:port``); requests are path
or ``AWS_ENDPOINT_URL``     style, TLS as the scheme says. Unset: AWS S3 itself.
``AWS_REGION``              the region (``AWS_DEFAULT_REGION`` too); unset: each client's default
``AWS_ACCESS_KEY_ID``,      the credentials; unset: each client's default chain (instance profile,
``AWS_SECRET_ACCESS_KEY``,  ``~/.aws``, web identity)
``AWS_SESSION_TOKEN``
==========================  =========================================================================

``sluice s3 env`` prints them for the project's local server. Secrets stay in the environment: none goes on a
command line, in Spark's conf (its UI shows it) or in a log; :meth:`ObjectStore.__repr__` hides them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

OBJECT_STORE_SCHEMES = ("s3a://", "s3n://", "s3://")


def is_object_store_uri(uri: str) -> bool:
    return str(uri).startswith(OBJECT_STORE_SCHEMES)


def bucket_and_key(uri: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` → (``bucket``, ``a/b``)."""
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key.strip("/")


@dataclass(frozen=True)
class ObjectStore:
    """The endpoint, region and credentials of the S3 API that ``s3a://`` / ``s3://`` URIs name."""

    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ObjectStore:
        env = os.environ if environ is None else environ
        return cls(endpoint=(env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None),
                   region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
                   access_key=env.get("AWS_ACCESS_KEY_ID") or None,
                   secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
                   session_token=env.get("AWS_SESSION_TOKEN") or None)

    @property
    def configured(self) -> bool:
        """Whether the environment names a store or credentials at all."""
        return bool(self.endpoint or self.access_key)

    def create_bucket(self, bucket: str) -> bool:
        """Create ``bucket`` if missing; True if it was created."""
        from botocore.exceptions import ClientError

        client = self.boto3_client()
        try:
            client.head_bucket(Bucket=bucket)
            return False
        except ClientError as err:
            if (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") != 404:
                raise
        client.create_bucket(Bucket=bucket)
        return True

    @property
    def where(self) -> str:
        """The store as an error message names it."""
        return self.endpoint or f"AWS S3 ({self.region or 'its default region'})"

    def arrow(self, *, timeout_seconds: float = 10.0):
        """Arrow's S3 file system on this store. Requests time out and are retried a few times, so a store
        that does not answer fails a call within about a minute, not never."""
        from pyarrow import fs as pafs

        options: dict = {"connect_timeout": timeout_seconds,
                         "request_timeout": timeout_seconds * 3,
                         "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=3)}
        if self.access_key and self.secret_key:
            options.update(access_key=self.access_key, secret_key=self.secret_key,
                           session_token=self.session_token)
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options.update(endpoint_override=parts.netloc + parts.path.rstrip("/"), scheme=parts.scheme or "https",
                           force_virtual_addressing=False)
        if self.region:
            options["region"] = self.region
        return pafs.S3FileSystem(**options)

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's ``storage_options``. ``conditional_put: etag``: a commit is a put-if-absent, so two
        writers of one table (the ledger, appended by every run) never overwrite each other's commit."""
        options = {"conditional_put": "etag"}
        if self.region:
            options["AWS_REGION"] = self.region
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            options["AWS_ALLOW_HTTP"] = "true" if self.endpoint.startswith("http:") else "false"
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if self.access_key and self.secret_key:
            options.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key)
            if self.session_token:
                options["AWS_SESSION_TOKEN"] = self.session_token
        return options

    def s3a_conf(self) -> dict[str, str]:
        """Hadoop S3A's settings (without ``spark.hadoop.``) that are no secret: the endpoint (path-style
        requests, TLS as its scheme says) and the region. S3A's default credential chain reads the keys from the
        driver's environment."""
        conf = {"fs.s3a.endpoint.region": self.region} if self.region else {}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.path.style.access"] = "true"
            conf["fs.s3a.connection.ssl.enabled"] = "true" if self.endpoint.startswith("https:") else "false"
        return conf

    def boto3_client(self, *, timeout_seconds: float = 10.0):
        """A boto3 S3 client on this store: the one client here that sends conditional writes (``If-None-Match``,
        ``If-Match``), which the lock in the store is made of. Bounded timeouts and retries, as :meth:`arrow`."""
        import boto3
        from botocore.config import Config

        config = Config(connect_timeout=timeout_seconds, read_timeout=timeout_seconds * 3,
                        retries={"max_attempts": 3, "mode": "standard"},
                        s3={"addressing_style": "path" if self.endpoint else "auto"})
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region or None,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            aws_session_token=self.session_token, config=config)


def delta_rs_location(uri: str, store: ObjectStore | None = None) -> tuple[str, dict[str, str] | None]:
    """A table's URI and ``storage_options`` as delta-rs wants them: ``s3a://`` is ``s3://`` there."""
    if not is_object_store_uri(uri):
        return uri, None
    bucket, key = bucket_and_key(uri)
    return f"s3://{bucket}/{key}".rstrip("/"), (store or ObjectStore.from_env()).delta_rs_options()


class ObjectStoreError(RuntimeError):
    """The object store cannot be used as configured: the message names the store, the bucket and the fix."""


def check_reachable(uris: list[str], store: ObjectStore | None = None, *, timeout_seconds: float = 10.0) -> None:
    """Ask the store for each bucket ``uris`` name (HEAD bucket, bounded in time): raise
    :class:`ObjectStoreError` for an endpoint that does not answer, credentials it refuses, a bucket that does
    not exist. Nothing is written. Nothing to ask when no URI is on an object store."""
    buckets = sorted({bucket_and_key(uri)[0] for uri in uris if is_object_store_uri(uri)})
    if not buckets:
        return
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    store = store or ObjectStore.from_env()
    client = store.boto3_client(timeout_seconds=timeout_seconds)
    for bucket in buckets:
        try:
            client.head_bucket(Bucket=bucket)
        except ClientError as err:
            status = (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if status == 404:
                raise ObjectStoreError(
                    f"bucket {bucket} does not exist at {store.where}: create it (`sluice s3 create-bucket "
                    f"{bucket}` on the local server) or fix the location that names it ({_named_in(uris, bucket)})"
                ) from None
            if status in (401, 403):
                raise ObjectStoreError(
                    f"the object store at {store.where} refused access to bucket {bucket} (HTTP {status}): wrong "
                    "credentials, or none with rights on it. Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                    "(for the local server: eval \"$(sluice s3 env)\")"
                ) from None
            raise ObjectStoreError(f"the object store at {store.where} answered HTTP {status} for bucket {bucket}: "
                                   f"{err}") from None
        except NoCredentialsError:
            raise ObjectStoreError(
                f"no credentials for the object store at {store.where}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (for the local server: eval \"$(sluice s3 env)\")") from None
        except BotoCoreError as err:
            raise ObjectStoreError(
                f"object store unreachable at {store.where} ({type(err).__name__}: {err}): start it (`make s3-up` "
                "for the local server) or fix AWS_ENDPOINT_URL") from None


def _named_in(uris: list[str], bucket: str) -> str:
    return ", ".join(u for u in uris if bucket_and_key(u)[0] == bucket)
