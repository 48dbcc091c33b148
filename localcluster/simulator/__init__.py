"""The localcluster simulator: it plays kubelet, kube-scheduler and the built-in
controllers of kube-controller-manager against ``cluster.storage``, so that
Deployments, StatefulSets, DaemonSets, Jobs, Services, PVCs, HPAs, Ingresses and
LeaderWorkerSets reach realistic status without any container engine.

The decision logic lives in pure modules (``scheduling``, ``kubelet``,
``deployment``, ``daemonset``, ...) that take observed objects and return
actions; ``engine.Simulator`` feeds them from a watch on storage and carries the
actions out, timed by a ``clock`` (a speed factor or a manual clock for tests).
"""
