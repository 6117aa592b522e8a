"""Steps that run on every node alone: memory, DGEMM, HPL, disk, noise, NUMA."""
