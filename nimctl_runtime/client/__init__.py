"""Talking to an API server: kubeconfig and in-cluster config, discovery-backed
REST mapping, an async Client over plain dicts, typed errors, retries and QPS limits.
"""
