"""The ``graphfleet`` command line."""
