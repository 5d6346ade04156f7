"""show_timeline: the table's active timeline as text, one row per instant (newest first)."""
from __future__ import annotations

from sqlext.sql.procedures.registry import optional, procedure, required


@procedure("show_timeline", [required("table", "string"), optional("limit", "int", 100)],
           "instant_time string, action string, state string, completion_time string, files_touched int, "
           "partitions_touched int, records_written long",
           "every instant of the active timeline, newest first: action, state, completion and what it touched")
def show_timeline(call, args):
    from sqlext.timeline_view import timeline_entries

    entries = timeline_entries(call.meta_client(args))[::-1][: max(args["limit"], 0)]
    return [(e.instant_time, e.action, e.state, e.completion_time, e.files_touched, e.partitions_touched,
             e.records_written) for e in entries]
