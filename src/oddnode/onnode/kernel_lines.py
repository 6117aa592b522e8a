"""The lines our C kernels print their results and their own check with,
as regular expressions: read by the package's parsers (parsers/) and by
the health program on nodes without oddnode (onnode/health_node.py).

Standard library only, for Python >= 3.6.
"""

import re

# ``result KERNEL RATE AVG MIN MAX``: a timed loop (memory, DGEMM).
RESULT_LINE = re.compile(r"^result\s+(\w+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
VALIDATION_OK = re.compile(r"^validation ok\s*$")
VALIDATION_FAILED = re.compile(r"^validation failed\s+(\w+)\s+(\S+)\s*$")
