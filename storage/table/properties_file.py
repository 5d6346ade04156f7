"""`java.util.Properties` text format, as Hudi stores `hoodie.properties`."""
from __future__ import annotations

from datetime import datetime, timezone

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.append("".join(f"\\u{u:04X}" for u in _utf16_units(ch)))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    # re-pair UTF-16 surrogates produced by \\u escapes
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    return dict(_split_key_value(line) for line in _logical_lines(text))


def format_properties(props: dict[str, str], now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    header = [
        f"#Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z",
        f"#{now.strftime('%a %b %d %H:%M:%S UTC %Y')}",
    ]
    body = [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(header + body) + "\n"
