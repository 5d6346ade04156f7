"""What the cleaner has retained, as the timeline records it (the last completed clean's earliest commit to
retain): readers refuse a time travel before it, and the services that plan against it (savepoint, restore,
archival, the next clean) read it here."""
from __future__ import annotations

from typing import Any

from storage.avro.container import read_avro_container
from storage.config import CleanConfigKeys as CK
from storage.table.meta_client import HoodieTableMetaClient
from storage.timeline.instant import Action, HoodieInstant


def last_completed_clean(meta: HoodieTableMetaClient) -> tuple[HoodieInstant, dict[str, Any]] | None:
    """The latest completed clean and its HoodieCleanMetadata."""
    last = meta.timeline.completed().of_actions([Action.CLEAN]).last()
    if last is None:
        return None
    return last, read_avro_container(meta.active_timeline.read_bytes(last))


def earliest_retained_commit(meta: HoodieTableMetaClient) -> str | None:
    """The instant from which every commit's file versions still exist (the last clean's earliest commit to
    retain); None when no clean removed versions by commit retention (nothing older is known to be gone)."""
    last = last_completed_clean(meta)
    return (last[1].get("earliestCommitToRetain") or None) if last else None


def check_files_retained(meta: HoodieTableMetaClient, instant_time: str, what: str) -> None:
    """Refuse a read at `instant_time` whose file versions the cleaner may have deleted (savepoints excepted)."""
    from storage.exception import HoodieReadError

    retained = earliest_retained_commit(meta)
    if retained is None or instant_time >= retained:
        return
    if meta.timeline.completed().of_actions([Action.SAVEPOINT]).contains_timestamp(instant_time):
        return
    raise HoodieReadError(f"{what} at {instant_time} of {meta.base_path}: the cleaner retains the file versions of "
                          f"commits from {retained} on ({CK.COMMITS_RETAINED.key}); the data before that was "
                          "cleaned. Query a later instant or a savepoint")
