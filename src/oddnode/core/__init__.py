"""The values every layer shares: results and findings (``model``), node
names and sets (``nodes``), natural order, units, registries, the site's
configuration, topology files, reading untrusted input and writing outputs.
Imports nothing of oddnode's but ``onnode``'s constants."""
