"""Pure readings of stored results, and the names of every series a step
stores: the interconnect's fit and pair patterns, Switchbench's curves,
sets and their partitions, sync, NUMA, noise, affinity, accounting, MPI
profiles and placement models, sweep grids.  Below the findings and the
report, above ``core`` and ``stats``; never runs anything."""
