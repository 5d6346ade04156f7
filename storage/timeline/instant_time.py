"""Instant times `yyyyMMddHHmmssSSS`: creation, parsing and user-facing forms."""
from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta, timezone

INSTANT_FORMAT = "%Y%m%d%H%M%S"
_lock = threading.Lock()
_last_issued = ""


def format_instant(moment: datetime) -> str:
    return moment.strftime(INSTANT_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant(instant: str) -> datetime:
    if len(instant) == 14:
        instant += "000"
    base = datetime.strptime(instant[:14], INSTANT_FORMAT)
    return base.replace(microsecond=int(instant[14:17]) * 1000)


def _now(use_local_time: bool) -> datetime:
    if use_local_time:
        return datetime.now()
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_instant_time(after: str | None = None, use_local_time: bool = False) -> str:
    """A fresh instant time, strictly greater than `after` and than any issued by this process."""
    global _last_issued
    with _lock:
        moment = _now(use_local_time)
        floor = max(after or "", _last_issued)
        candidate = format_instant(moment)
        if floor and candidate <= floor[:17].ljust(17, "0"):
            candidate = format_instant(parse_instant(floor[:17]) + timedelta(milliseconds=1))
        _last_issued = candidate
        return candidate


_FORMATS = (
    (re.compile(r"^\d{17}$"), None),
    (re.compile(r"^\d{14}$"), None),
    (re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{1,3}$"), "%Y-%m-%d %H:%M:%S.%f"),
    (re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}$"), None),
    (re.compile(r"^\d{4}-\d{2}-\d{2}$"), "%Y-%m-%d"),
)


def normalize_instant_time(text: str) -> str:
    """Accept `yyyyMMddHHmmssSSS`, `yyyyMMddHHmmss`, `yyyy-MM-dd HH:mm:ss[.SSS]` or `yyyy-MM-dd` (end of day excluded:
    as of the start of that day), returning the 17-digit form used for comparisons with instants."""
    value = str(text).strip()
    if re.fullmatch(r"\d{17}", value):
        return value
    if re.fullmatch(r"\d{14}", value):
        return value + "999"
    for pattern, fmt in _FORMATS[2:]:
        if pattern.match(value):
            if fmt is None:
                moment = datetime.fromisoformat(value.replace("T", " "))
                return format_instant(moment)[:14] + "999"
            if fmt == "%Y-%m-%d":
                return datetime.strptime(value, fmt).strftime(INSTANT_FORMAT) + "000"
            moment = datetime.strptime(value, fmt)
            return format_instant(moment)
    raise ValueError(
        f"invalid instant time {text!r}: expected yyyyMMddHHmmssSSS, yyyy-MM-dd HH:mm:ss[.SSS] or yyyy-MM-dd"
    )
