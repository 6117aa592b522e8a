"""Our node scripts run on every node at once and their answers parsed:
the inventory probe, the accounting collector, the affinity sampler."""
