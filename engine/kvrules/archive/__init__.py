"""Classifying archives: many campaigns, on this machine or a Dask cluster.

* :mod:`kvrules.archive.executors` - ``--executor local|dask|dask-local`` turned into an
  :class:`kvrules.api.Executor` (Dask is imported only when a Dask executor is chosen).
* :mod:`kvrules.archive.cluster` - batches of cells classified by dask.distributed workers,
  each keeping one compiled policy per digest; results come back in input order.
"""
