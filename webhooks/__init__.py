"""Admission validators (and defaulters) per kind, served by nimctl_runtime.webhook."""
