"""durable-rules behind one door.

* ``lower``: compiler passes that check the engine's limits and lower rules to rulesets;
* ``encode``: the typed encoding of fact values the lowered conditions test;
* ``session`` / ``host``: one stratified evaluation on the engine (worker process only);
* ``supervisor``: the forked worker that contains the engine's crashes.

Nothing outside this package imports durable or these encodings.
"""
from kvrules.backend.durable.encode import fields_problems as refused_fields
from kvrules.backend.durable.lower import PASSES
from kvrules.backend.durable.supervisor import EngineSupervisor as Backend

__all__ = ["Backend", "PASSES", "refused_fields"]
