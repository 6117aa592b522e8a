"""What tests share: scripted clusters, sample outputs, the command line run
two ways, the testbed's fixtures.  Test modules import from here, never from
one another (tests/unit/test_suite_layout.py checks it)."""
