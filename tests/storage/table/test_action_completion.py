"""One completion step for every action (storage.table.action_completion): the order of check, pre-complete
hooks, completed instant and post-complete hooks, and what a failure at each step leaves. That every action passes
through it: tests/storage/table_service/test_every_action_completes.py."""
from __future__ import annotations

import logging
from contextlib import contextmanager

import pytest

from storage.table.action_completion import (
    ActionCompletion,
    complete_action,
    register_post_complete,
    register_pre_complete,
)
from storage.table.meta_client import HoodieTableMetaClient
from storage.table.table_config import HoodieTableConfig
from storage.timeline.instant import Action


@pytest.fixture
def meta(tmp_path):
    config = HoodieTableConfig({"hoodie.table.name": "t", "hoodie.table.type": "COPY_ON_WRITE",
                                "hoodie.table.version": "6", "hoodie.timeline.layout.version": "1",
                                "hoodie.table.recordkey.fields": "id"})
    return HoodieTableMetaClient.init_table(str(tmp_path / "t"), config)


@pytest.fixture
def hooks():
    """Hooks recording what they see; unregistered afterwards (the registry is process-wide)."""
    seen: list[tuple] = []
    undo = [register_pre_complete(lambda c: seen.append(("pre", c.action, c.operation, _state(c)))),
            register_post_complete(lambda c, done: seen.append(("post", c.action, c.operation, _state(c))))]
    yield seen
    for u in undo:
        u()


def _state(completion: ActionCompletion) -> str:
    found = completion.meta.active_timeline.reload().timeline.find(completion.instant_time)
    return found.state.value if found is not None else "gone"


def _inflight(meta):
    timeline = meta.active_timeline
    requested = timeline.create_requested(Action.COMMIT, timeline.new_instant_time())
    return timeline.transition_to_inflight(requested, b"{}")


def test_order_check_pre_hooks_complete_post_hooks_under_the_lock(meta, hooks):
    steps = []

    @contextmanager
    def lock():
        steps.append("lock")
        yield
        steps.append("unlock")

    inflight = _inflight(meta)
    done = complete_action(ActionCompletion(meta, inflight, b"{}", None, "upsert"), lock(),
                           check=lambda: steps.append("check"))
    assert steps == ["lock", "check", "unlock"]
    assert hooks == [("pre", "commit", "upsert", "INFLIGHT"), ("post", "commit", "upsert", "COMPLETED")]
    assert done.is_completed and meta.reload().timeline.completed().contains_timestamp(inflight.timestamp)


@pytest.mark.parametrize("failing", ["check", "pre_hook"])
def test_a_failing_check_or_pre_hook_leaves_the_action_inflight(meta, hooks, failing):
    def boom(*_):
        raise RuntimeError("conflict")

    undo = register_pre_complete(boom) if failing == "pre_hook" else (lambda: None)
    try:
        inflight = _inflight(meta)
        with pytest.raises(RuntimeError, match="conflict"):
            complete_action(ActionCompletion(meta, inflight, b"{}"), check=boom if failing == "check" else None)
    finally:
        undo()
    assert meta.reload().timeline.find(inflight.timestamp).is_inflight
    assert [h[0] for h in hooks] == ([] if failing == "check" else ["pre"])


def test_a_failing_post_hook_is_logged_and_never_undoes_the_action(meta, caplog):
    undo = register_post_complete(lambda c, done: 1 / 0)
    try:
        inflight = _inflight(meta)
        with caplog.at_level(logging.ERROR, logger="storage.table.action_completion"):
            done = complete_action(ActionCompletion(meta, inflight, b"{}"))
    finally:
        undo()
    assert done.is_completed and meta.reload().timeline.find(inflight.timestamp).is_completed
    assert "failed" in caplog.text and "ZeroDivisionError" in caplog.text
