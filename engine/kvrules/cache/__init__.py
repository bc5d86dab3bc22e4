"""Caches that make a second run cheaper than the first, never different from it.

Caches hold data, never code: an entry is decoded (msgspec, typed) and never unpickled,
unmarshalled or evaluated, so whoever can write to a cache folder can at worst plant wrong
entries (a forged verdict or policy), never run code in the processes that read it.

* :mod:`kvrules.cache.store` - where cache files live and how they are written (atomically)
  and read back (verified: an entry that fails its checksum is a miss, never an error).
* :mod:`kvrules.cache.codec` - the data-only encoding of typed record trees.
* :mod:`kvrules.cache.policies` - compiled policies, keyed by what they were compiled from.
* :mod:`kvrules.cache.verdicts` - cell verdicts, keyed by the bytes a cell reads and the policy.
"""
