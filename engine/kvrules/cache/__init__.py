"""Caches that make a second run cheaper than the first, never different from it.

Caches hold data, never code: an entry is decoded (msgspec, typed) and never unpickled,
unmarshalled or evaluated, and signed with a key kept outside the folder, so whoever can
write to a cache folder without the key costs at worst a recompute: never a wrong verdict,
never code run in the processes that read it.

* :mod:`kvrules.cache.store` - where cache files live and how they are written (atomically)
  and read back (verified: an entry whose signature does not match is a miss, never an error).
* :mod:`kvrules.cache.codec` - the data-only encoding of typed record trees.
* :mod:`kvrules.cache.policies` - compiled policies, keyed by what they were compiled from.
* :mod:`kvrules.cache.verdicts` - cell verdicts, keyed by the bytes a cell reads and the policy.
"""
