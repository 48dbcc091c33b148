"""nimctl's controller runtime: an asyncio re-implementation of controller-runtime.

It knows Kubernetes and nothing of NIM. Sub-packages follow controller-runtime's
split: client (config, REST mapping, typed errors), cache (Reflector, Store,
SharedInformer, label-filtered Cache) and webhook (AdmissionReview server).
It imports none of the operator's own packages (api, manifests, platforms,
controllers, webhooks), nor localcluster or the program (nimctl).
"""
