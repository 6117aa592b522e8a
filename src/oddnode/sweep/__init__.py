"""Parameter sweeps (``oddnode sweep``): one benchmark step run over a grid
of environment variables and step options, every setting R times in an
interleaved order, stored with its parameters and judged against the
default setting.

``grid`` makes the settings and their order, ``runner`` runs them (the
variables reaching every process on the nodes, MPI ranks included),
``analysis`` is the pure reading of a stored sweep: the metric per
setting, the best setting per message size and its significance.  The
terminal view and the figures are in ``report/sweep.py``.
"""
