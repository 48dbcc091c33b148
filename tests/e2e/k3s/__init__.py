"""Parity with a real API server: k3s started by testcontainers."""
