"""Typed API (pydantic v2) for apps.nvidia.com/v1alpha1 and nvidia.com/v1, and CRD
generation from those models. Every other room speaks this vocabulary.
"""
