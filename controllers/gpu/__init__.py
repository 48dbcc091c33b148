"""GPU node lifecycle reconcilers: ClusterPolicy states over node DaemonSets,
node labelling and driver upgrades.
"""
