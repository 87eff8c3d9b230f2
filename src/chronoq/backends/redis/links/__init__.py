"""The connections of the Redis backends: one node (``single.py``, blocking;
``single_aio.py``, asyncio) and Redis Cluster (``cluster.py``,
``cluster_aio.py``), with the cluster's routing without I/O: which node
serves a key (``plan.py``) and how a round trip is split and sent again
(``redirects.py``)."""
