"""Unit tests for localcluster patch algorithms and server-side apply."""
