"""Helpers for the interop tests: a local OpenAI-/Anthropic-compatible server, collectors on loopback ports,
emitter scripts for real instrumentations and the OpenTelemetry JavaScript SDK."""
