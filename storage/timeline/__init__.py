"""The timeline: instants (requested -> inflight -> completed) under `.hoodie/` and their metadata."""
from storage.timeline.instant import HoodieInstant, State, Action  # noqa: F401
