"""Protobuf request bodies."""
