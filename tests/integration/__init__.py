"""integration tests."""
