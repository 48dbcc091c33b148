"""The GPU driver upgrade controller (gpu-operator.md §4): labels, slots, a pure plan, an executor.

``plan.plan`` decides, from a snapshot of the cluster, what every managed node
does next (NVIDIA's state machine, in NVIDIA's fixed order); ``executor``
carries the decisions out through the client; ``controller`` is the singleton
reconciler that wires the two to the cache and reports why nodes wait.
"""
