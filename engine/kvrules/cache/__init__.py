"""Caches that make a second run cheaper than the first, never different from it.

* :mod:`kvrules.cache.store` - where cache files live and how they are written (atomically)
  and read back (verified: an entry that fails its checksum is a miss, never an error).
* :mod:`kvrules.cache.policies` - compiled policies, keyed by what they were compiled from.
* :mod:`kvrules.cache.validators` - the evidence schemas' generated validators, compiled.
* :mod:`kvrules.cache.verdicts` - cell verdicts, keyed by the bytes a cell reads and the policy.
"""
