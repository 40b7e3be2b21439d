"""The ``haystack-mvr`` command line (nothing imports this package)."""
