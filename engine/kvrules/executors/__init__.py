"""Where cells are classified: on this machine or on a Dask cluster.

* :mod:`kvrules.executors.choose` - ``--executor local|dask|dask-local`` turned into an
  :class:`kvrules.api.Executor` (Dask is imported only when a Dask executor is chosen).
* :mod:`kvrules.executors.dask_cluster` - batches of cells classified by dask.distributed workers,
  each keeping one compiled policy per digest; results come back in input order.
"""
