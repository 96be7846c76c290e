"""Test helpers that fake the outside world over real HTTP.

Import from :mod:`oloproof.testing.fake_provider` (not re-exported here, so
``python -m oloproof.testing.fake_provider`` runs without a double import).
"""
