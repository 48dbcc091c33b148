"""Admission rule tables for NIMService and NIMCache."""
