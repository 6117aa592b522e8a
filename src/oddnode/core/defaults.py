"""Defaults the command line shows before it loads what they belong to:
here, in the lowest layer and with no imports, so that help and completion
load nothing heavy to print them."""

STORE_PATH = "oddnode.duckdb"  # the results store when neither --db nor the configuration names one
