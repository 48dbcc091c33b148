"""An in-process Kubernetes API server (real HTTPS, real watch streams) plus a
simulator of kubelet and the built-in controllers: the test substrate and the
embedded cluster of `nimctl local`.
"""
