"""What oddnode shows people: the terminal, plots and the HTML report."""

# The width that output rendered without a terminal's limit gets (``--wide``,
# a file or a pipe): wider than any table of oddnode's, so none is cut.
WIDE = 10_000
