"""The operations of the API above the stores, each defined once.

``checks``: the argument checks, turning a user's arguments into what a
backend takes. ``call``: what an operation is (a ``Call``: its checked
arguments and the backend steps it takes, no I/O) and how a facade exposes
it (``Op``). The other modules hold the operations, by theme; ``surface``
lists which facade offers which. ``chronoq.Queue``, ``chronoq.aio.AsyncQueue``
and the HTTP clients run the same ``Call``s with their own I/O.
"""
