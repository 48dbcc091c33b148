"""Webhook server unit tests."""
