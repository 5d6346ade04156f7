"""Hooks that tests use to exercise failure paths of production code (crash points)."""
