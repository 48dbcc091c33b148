"""Webhook server over TLS."""
