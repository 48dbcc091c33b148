"""Pure builders of the Kubernetes objects nimctl creates, one module per kind.
Builders take plain values and return dicts in Kubernetes JSON shape; no I/O.
"""
