"""The judgement of a store: the whole analysis (``analysis``), before
against after (``compare``) and the reading of a sweep (``sweep``).
Reads the store; never runs anything on the nodes."""
