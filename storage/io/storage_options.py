"""How to reach object stores, given the way Spark users give it: Hadoop's `fs.*` keys (in Spark conf as
`spark.hadoop.fs.s3a.endpoint`, ...; in write/read options as `fs.s3a.endpoint`, ...) and the AWS environment
variables. Resolved on the driver and shipped to executors inside task contexts (small and picklable), so every
process reaches the table through the same URI and credentials.

S3 (`s3://`, `s3a://`, `s3n://`), Hadoop's keys and their pyarrow equivalents:
- `fs.s3a.endpoint` -> endpoint_override (+ scheme from an `http://` / `https://` prefix, else
  `fs.s3a.connection.ssl.enabled`, default true); `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` otherwise
- `fs.s3a.access.key`, `fs.s3a.secret.key`, `fs.s3a.session.token` -> credentials; `AWS_ACCESS_KEY_ID`,
  `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` otherwise
- `fs.s3a.endpoint.region` (or `fs.s3a.region`) -> region; `AWS_REGION` / `AWS_DEFAULT_REGION` otherwise
- `fs.s3a.path.style.access` -> path-style addressing (pyarrow's default); false -> virtual-hosted
- `fs.s3a.aws.credentials.provider`: Hadoop's AnonymousAWSCredentialsProvider -> anonymous access; any other
  provider -> AWS's default chain (config files, instance profiles)
- `fs.s3a.connection.establish.timeout` / `fs.s3a.connection.timeout` (ms) -> connect / request timeouts;
  `fs.s3a.attempts.maximum` -> attempts per request
Per-bucket overrides (`fs.s3a.bucket.<bucket>.<key>`) win over the general keys, as in Hadoop.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from storage.config import HoodieConfig
from storage.exception import HoodieIOError

log = logging.getLogger(__name__)

_SPARK_HADOOP_PREFIX = "spark.hadoop."
_ENV_KEYS = {
    "fs.s3a.access.key": ("AWS_ACCESS_KEY_ID",),
    "fs.s3a.secret.key": ("AWS_SECRET_ACCESS_KEY",),
    "fs.s3a.session.token": ("AWS_SESSION_TOKEN",),
    "fs.s3a.endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "fs.s3a.endpoint.region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
}
DEFAULT_REGION = "us-east-1"
_ANONYMOUS_PROVIDER = "AnonymousAWSCredentialsProvider"
_SECRET_KEYS = ("fs.s3a.secret.key", "fs.s3a.session.token")


@dataclass(frozen=True)
class StorageOptions:
    """Hadoop-style `fs.*` settings (the environment already folded in), as sorted pairs."""

    entries: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, *sources: Mapping[str, Any] | None, use_env: bool = True) -> "StorageOptions":
        """Merge `sources` (later wins): Spark conf or option maps; `spark.hadoop.fs.*` and `fs.*` keys are
        taken, everything else ignored. Environment variables fill keys no source set."""
        merged: dict[str, str] = {}
        if use_env:
            for key, env_names in _ENV_KEYS.items():
                value = next((os.environ[n] for n in env_names if os.environ.get(n)), None)
                if value is not None:
                    merged[key] = value
        for source in sources:
            for key, value in (source or {}).items():
                key = str(key)
                if key.startswith(_SPARK_HADOOP_PREFIX):
                    key = key[len(_SPARK_HADOOP_PREFIX):]
                if key.startswith("fs.") and value is not None:
                    merged[key] = str(value)
        return cls(tuple(sorted(merged.items())))

    def get(self, key: str, bucket: str | None = None) -> str | None:
        values = dict(self.entries)
        if bucket:
            scoped = key.replace("fs.s3a.", f"fs.s3a.bucket.{bucket}.", 1)
            if scoped in values:
                return values[scoped]
        return values.get(key)

    def __repr__(self) -> str:  # never print secrets in logs or errors
        shown = [(k, "***" if k.endswith(_SECRET_KEYS) else v) for k, v in self.entries]
        return f"StorageOptions({shown})"


@dataclass(frozen=True)
class S3Settings:
    endpoint: str | None  # host[:port], no scheme
    scheme: str  # http | https
    region: str
    access_key: str | None
    secret_key: str | None
    session_token: str | None
    anonymous: bool
    default_chain: bool  # let AWS's default credential chain find credentials
    path_style: bool
    connect_timeout_s: float
    request_timeout_s: float
    max_attempts: int

    @property
    def endpoint_url(self) -> str | None:
        return f"{self.scheme}://{self.endpoint}" if self.endpoint else None


def s3_settings(options: StorageOptions, bucket: str) -> S3Settings:
    """The S3 connection for `bucket`; without credentials (and no provider that finds its own) a clear error,
    raised before anything is read or written."""
    def get(key: str) -> str | None:
        return options.get(key, bucket)

    endpoint = get("fs.s3a.endpoint")
    ssl = _bool(get("fs.s3a.connection.ssl.enabled"), True)
    scheme = "https" if ssl else "http"
    if endpoint and "://" in endpoint:
        scheme, endpoint = endpoint.split("://", 1)
    endpoint = endpoint.rstrip("/") if endpoint else None
    provider = get("fs.s3a.aws.credentials.provider") or ""
    anonymous = _ANONYMOUS_PROVIDER in provider
    access, secret = get("fs.s3a.access.key"), get("fs.s3a.secret.key")
    default_chain = bool(provider) and not anonymous
    if not anonymous and not default_chain and not (access and secret):
        raise HoodieIOError(
            f"no S3 credentials for bucket {bucket!r}: set spark.hadoop.fs.s3a.access.key and "
            "spark.hadoop.fs.s3a.secret.key (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or "
            "fs.s3a.aws.credentials.provider for anonymous access or AWS's default credential chain")
    return S3Settings(
        endpoint=endpoint, scheme=scheme.lower(),
        region=get("fs.s3a.endpoint.region") or get("fs.s3a.region") or DEFAULT_REGION,
        access_key=access, secret_key=secret, session_token=get("fs.s3a.session.token"),
        anonymous=anonymous, default_chain=default_chain,
        path_style=_bool(get("fs.s3a.path.style.access"), True),
        connect_timeout_s=_millis(get("fs.s3a.connection.establish.timeout"), 5.0),
        request_timeout_s=_millis(get("fs.s3a.connection.timeout"), 60.0),
        max_attempts=int(get("fs.s3a.attempts.maximum") or 3),
    )


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() in ("true", "1", "yes")


def _millis(value: str | None, default_s: float) -> float:
    if not value:
        return default_s
    text = str(value).strip().lower()
    try:
        if text.endswith("ms"):
            return float(text[:-2]) / 1000
        if text.endswith("s"):
            return float(text[:-1])
        return float(text) / 1000
    except ValueError:
        raise HoodieIOError(f"invalid timeout {value!r} in the S3 settings") from None


# -- the process default: what sessions configured, for code that is not handed options ------------------

_default_provider: Callable[[], StorageOptions] | None = None


def set_default_storage_options(provider: Callable[[], StorageOptions] | StorageOptions | None) -> None:
    """Set by the Spark entry points (sqlext.session) so that code not handed options (procedures, the catalog)
    reaches object stores as the session does: a provider is asked each time, so a `SET
    spark.hadoop.fs.s3a...` made later in the session counts too."""
    global _default_provider
    if isinstance(provider, StorageOptions):
        fixed = provider
        provider = lambda: fixed  # noqa: E731
    _default_provider = provider


def default_storage_options() -> StorageOptions:
    if _default_provider is not None:
        try:
            return _default_provider()
        except Exception as exc:  # noqa: BLE001 - e.g. the session was stopped: the environment still counts
            log.debug("default storage options unavailable (%s); using the environment", exc)
    return StorageOptions.of()


def session_storage_options(spark, config: HoodieConfig = HoodieConfig()) -> StorageOptions:
    """The storage options of a Spark session (its `spark.hadoop.fs.*` conf, static and runtime) overlaid with
    the `fs.*` options of a write's or read's `config`; the process default when there is no session."""
    if spark is None:
        return StorageOptions.of(dict(default_storage_options().entries), config.props)
    from storage.io.spark_conf import runtime_conf, static_conf

    conf = {**static_conf(spark, _SPARK_HADOOP_PREFIX + "fs."), **static_conf(spark, "fs.")}
    return StorageOptions.of(conf, runtime_conf(spark, (_SPARK_HADOOP_PREFIX,)), config.props)
