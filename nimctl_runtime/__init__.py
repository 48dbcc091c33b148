"""nimctl's controller runtime: an asyncio re-implementation of controller-runtime.

It knows Kubernetes and nothing of NIM. Sub-packages follow controller-runtime's
split: client (config, REST mapping, typed errors), cache (Reflector, Store,
SharedInformer, label-filtered Cache), webhook (AdmissionReview server) and
localcluster (the in-process API server used by tests and `nimctl local`).
Only `nimctl_runtime.cli` may import the operator's own packages.
"""
