"""oddnode's own memory kernel (``oddnode/kernels/memory.c``), registered as
a tool like any other so that its saved outputs import the same way."""

from __future__ import annotations

from oddnode.parsers.base import ParsedOutput, register_parser


@register_parser("oddnode-memory")
def parse_oddnode_memory(text: str, source: str) -> ParsedOutput:
    """Parse one run of the memory kernel (see oddnode.kernels.memory)."""
    # Imported here, not at the top: oddnode.kernels imports oddnode.parsers,
    # whose __init__ imports this module, so a top-level import would find
    # oddnode.kernels half-initialised whenever it is imported first.
    from oddnode.kernels.memory import parse_memory_output

    return parse_memory_output(text, source)
