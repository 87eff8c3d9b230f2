"""The ``chronoq`` command line: ``chronoq --help``, or ``python -m chronoq.cli.main``."""
