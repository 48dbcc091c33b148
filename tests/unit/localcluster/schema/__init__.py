"""Unit tests for localcluster structural schemas and CEL rules."""
