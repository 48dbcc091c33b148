"""One Reconciler per kind (NIMService, NIMCache, ...); gpu/ holds the
ClusterPolicy, node-labelling and driver-upgrade reconcilers.
"""
