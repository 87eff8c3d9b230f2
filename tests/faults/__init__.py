"""Fault-injection runs in the manner of Jepsen: real producers and ``chronoq worker``
processes record what they did, faults are injected, and a checker reads the histories."""
