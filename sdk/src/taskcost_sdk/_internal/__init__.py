"""Internals of taskcost_sdk. Nothing here is public API; import from ``taskcost_sdk`` instead."""
