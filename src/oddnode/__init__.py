"""oddnode: is the cluster ready for production, and if not, which node is the odd one out."""

__version__ = "0.1.0"
