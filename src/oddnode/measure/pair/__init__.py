"""Steps on pairs of nodes: ping-pong in pair patterns, bisection, the
all-pairs matrix and Switchbench."""
