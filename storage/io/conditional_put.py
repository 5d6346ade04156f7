"""Conditional writes on S3: create-if-absent (a PUT with `If-None-Match: *`, accepted only when no object has
that key) and compare-and-swap (a PUT with `If-Match: <etag>`, accepted only while the object still has that
ETag), as S3 and S3-compatible stores that implement conditional writes do. pyarrow's S3 output streams cannot
send these headers, so these requests go through botocore, the maintained AWS client.
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


def _precondition_failed(exc) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey") or status in (404, 409, 412)


def read_with_etag(settings: S3Settings, bucket: str, key: str, uri: str) -> tuple[bytes, str] | None:
    """The object's content and ETag, None when absent (the compare half of a compare-and-swap)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        response = _client(settings).get_object(Bucket=bucket, Key=key)
        return response["Body"].read(), response["ETag"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise HoodieIOError(f"cannot read {uri} at {settings.endpoint_url or 'AWS S3'}: {exc}") from exc
    except BotoCoreError as exc:
        raise HoodieIOError(f"cannot read {uri} at {settings.endpoint_url or 'AWS S3'}: {exc}") from exc


def put_conditional(settings: S3Settings, bucket: str, key: str, data: bytes, uri: str,
                    if_match: str | None) -> str | None:
    """Write `data` only if the object is absent (`if_match` None: `If-None-Match: *`) or still has the ETag
    `if_match` (`If-Match`). Answers the new ETag, or None when the condition failed (someone wrote first)."""
    from botocore.exceptions import BotoCoreError, ClientError

    condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"}
    try:
        return _client(settings).put_object(Bucket=bucket, Key=key, Body=data, **condition)["ETag"]
    except ClientError as exc:
        if _precondition_failed(exc):
            return None
        raise HoodieIOError(f"cannot write {uri} at {settings.endpoint_url or 'AWS S3'}: {exc}") from exc
    except BotoCoreError as exc:
        raise HoodieIOError(f"cannot write {uri} at {settings.endpoint_url or 'AWS S3'}: {exc}") from exc
