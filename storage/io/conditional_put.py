"""Create-if-absent on S3: a PUT with `If-None-Match: *`, which S3 (and S3-compatible stores that implement
conditional writes) accepts only when no object has that key. pyarrow's S3 output streams cannot send the
header, so this one request goes through botocore, the maintained AWS client.
"""
from __future__ import annotations

import functools

from storage.exception import HoodieFileAlreadyExistsError, HoodieIOError
from storage.io.storage_options import S3Settings


@functools.lru_cache(maxsize=16)
def _client(settings: S3Settings):
    try:
        import boto3
        from botocore.config import Config
    except ImportError:  # pragma: no cover - a declared dependency
        raise HoodieIOError("S3 conditional writes need boto3 (pip install boto3)") from None
    config = Config(s3={"addressing_style": "path" if settings.path_style else "virtual"},
                    connect_timeout=settings.connect_timeout_s, read_timeout=settings.request_timeout_s,
                    retries={"max_attempts": settings.max_attempts, "mode": "standard"},
                    signature_version=None if not settings.anonymous else __import__("botocore").UNSIGNED)
    kwargs = {"region_name": settings.region, "config": config, "endpoint_url": settings.endpoint_url}
    if settings.access_key and not settings.default_chain:
        kwargs.update(aws_access_key_id=settings.access_key, aws_secret_access_key=settings.secret_key,
                      aws_session_token=settings.session_token)
    return boto3.session.Session().client("s3", **kwargs)


def put_if_absent(settings: S3Settings, bucket: str, key: str, data: bytes, uri: str) -> None:
    """Create `bucket/key` with `data` unless it exists (then `HoodieFileAlreadyExistsError`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        _client(settings).put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            raise HoodieFileAlreadyExistsError(f"file already exists: {uri}") from None
        raise HoodieIOError(f"cannot create {uri}: {code or exc}") from exc
    except BotoCoreError as exc:
        raise HoodieIOError(f"cannot create {uri}: {exc}") from exc
