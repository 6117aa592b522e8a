"""Scripted clusters: transports that answer the node runner's jobs as a
cluster of known faults would, one module per family of steps."""
