"""Everything that runs on a node: standard library only (Python >= 3.6),
shipped in the command line.  Imports nothing of oddnode's outside this
package: the inventory probe, the accounting collector and its readers,
the affinity sampler and the node topology it reads, the kernel runner,
and the health check's program (its fact rules, kernel lines and Slurm
state shared with the package)."""
