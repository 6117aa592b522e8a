"""Whether a fact's value meets an expectation: the conditions of an
expectations file (``equals``, ``match``, ``regex``, ``in``, ``min``,
``max``, ``tolerance``) as a plain mapping, checked on one value, and said
in words.

Standard library only, for Python >= 3.6: findings/expectations.py reads
the files and judges a cluster with it, and the health program written by
``oddnode health --install`` judges its node with it, so both hold a fact
to the same rule.
"""

import re
from fnmatch import fnmatchcase

# A plain decimal number: what a numeric fact looks like ("nan", "inf" and
# "1_000", which float() also takes, are text).
NUMBER_TEXT = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_NUMBER = re.compile("^" + NUMBER_TEXT + "$")

# The keys of the processes the probe saw running, and the value a node
# that reported its processes has for one it does not run.
PROCESS_PREFIX = "process."
NOT_RUNNING = "not running"
# The value shown for a fact a node did not report.
NOT_REPORTED = "(not reported)"

CONDITIONS = ("min", "max", "equals", "match", "regex", "in", "tolerance")


def parse_number(text):
    """The value of a fact written as a plain decimal number, else None."""
    text = str(text).strip()
    return float(text) if _NUMBER.match(text) else None


def equal(value, expected, tolerance=None):
    """Numbers as numbers (within a relative tolerance when given), text as text."""
    number, target = parse_number(value), parse_number(expected)
    if number is not None and target is not None:
        if tolerance is not None:
            return abs(number - target) <= tolerance * abs(target)
        return number == target
    return tolerance is None and value == expected


def accepts(conditions, value):
    """Whether one value meets every condition of ``conditions`` (a mapping
    of CONDITIONS' names, as an expectations file writes them)."""
    number = parse_number(value)
    tolerance = conditions.get("tolerance")
    if conditions.get("equals") is not None and not equal(value, str(conditions["equals"]), tolerance):
        return False
    if conditions.get("match") is not None and not fnmatchcase(value, conditions["match"]):
        return False
    if conditions.get("regex") is not None and not re.search(conditions["regex"], value):
        return False
    if conditions.get("in") is not None and not any(equal(value, str(choice)) for choice in conditions["in"]):
        return False
    if conditions.get("min") is not None and (number is None or number < conditions["min"]):
        return False
    if conditions.get("max") is not None and (number is None or number > conditions["max"]):
        return False
    return True


def conditions_problem(conditions):
    """What is wrong with ``conditions`` as read back from JSON (the
    expectations file's parser checks its own YAML), or None."""
    if not isinstance(conditions, dict) or not conditions:
        return "conditions must be a mapping of " + ", ".join(CONDITIONS)
    unknown = sorted(str(name) for name in conditions if name not in CONDITIONS)
    if unknown:
        return "unknown condition " + ", ".join(unknown)
    for name in ("min", "max", "tolerance"):
        value = conditions.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return "{} must be a number, not {!r}".format(name, value)
    for name in ("equals", "match", "regex"):
        if conditions.get(name) is not None and not isinstance(conditions[name], str):
            return "{} must be text, not {!r}".format(name, conditions[name])
    if conditions.get("in") is not None and not isinstance(conditions["in"], list):
        return "in must be a list of values"
    if conditions.get("regex") is not None:
        try:
            re.compile(conditions["regex"])
        except re.error as err:
            return "regex {!r} does not compile: {}".format(conditions["regex"], err)
    return None


def format_number(value):
    """12 for 12.0, 0.25 for 0.25."""
    return "{:g}".format(value) if not float(value).is_integer() else str(int(value))


def describe(conditions):
    """The conditions in words: 'be off', 'match 6.1.*', 'be between 1 and 2'."""
    parts = []
    if conditions.get("equals") is not None:
        tolerance = conditions.get("tolerance")
        spread = " ± {:g}%".format(tolerance * 100) if tolerance is not None else ""
        parts.append("be {}{}".format(conditions["equals"], spread))
    if conditions.get("match") is not None:
        parts.append("match " + conditions["match"])
    if conditions.get("regex") is not None:
        parts.append("match /{}/".format(conditions["regex"]))
    if conditions.get("in") is not None:
        parts.append("be one of " + ", ".join(str(choice) for choice in conditions["in"]))
    low, high = conditions.get("min"), conditions.get("max")
    if low is not None and high is not None:
        parts.append("be between {} and {}".format(format_number(low), format_number(high)))
    elif low is not None:
        parts.append("be at least " + format_number(low))
    elif high is not None:
        parts.append("be at most " + format_number(high))
    return " and ".join(parts)


def node_value(facts, key, processes_reported):
    """A node's value for ``key`` among its ``facts``: a process it does not
    run is NOT_RUNNING when it reported its processes; None when unreported."""
    value = facts.get(key)
    if value is None and key.startswith(PROCESS_PREFIX) and processes_reported:
        return NOT_RUNNING
    return value
