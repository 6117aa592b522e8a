"""The interconnect stage: pair patterns, ping-pong, bisection, Switchbench."""
