"""oddnode's own C kernels and their shared headers: data only.

The node runner (``oddnode.onnode.node_runner``) compiles one of them once
per node and runs it; ``oddnode.reach.jobs`` ships the source with its
headers pasted in; each kernel's argv, parser, series and step live with
its step in ``oddnode.measure`` (``measure/node/memory.py`` for
``memory.c``, ``measure/pair/pingpong.py`` for ``pingpong.c``).
"""
