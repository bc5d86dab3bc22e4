"""durable-rules behind one door.

* ``lower``: compiler passes that check the engine's limits and lower rules to rulesets;
* ``encode``: the typed encoding of fact values the lowered conditions test;
* ``session`` / ``host``: one stratified evaluation on the engine (worker process only);
* ``supervisor``: the forked worker that contains the engine's crashes.

Nothing outside this package imports durable or these encodings, nor any of these modules:
the names below are the whole boundary (``tests/test_layering.py`` holds it).

* ``Backend``: the supervised engine (``evaluate(facts, cell_id)``, or ``submit`` then
  ``result`` to prepare the next cell meanwhile; ``close()``);
* ``evaluate_in_process``: the same evaluation, unsupervised, for the authoring tools;
* ``PASSES``: the backend's compiler passes (appended to the policy's own);
* ``refused_fields``: field values the engine must never see;
* ``signals_deferred`` / ``child_signals``: fork safely next to the engine worker.
"""
from kvrules.backend.durable.encode import fields_problems as refused_fields
from kvrules.backend.durable.lower import PASSES
from kvrules.backend.durable.supervisor import EngineSupervisor as Backend
from kvrules.backend.durable.supervisor import child_signals, evaluate_in_process, signals_deferred

__all__ = ["Backend", "PASSES", "child_signals", "evaluate_in_process", "refused_fields",
           "signals_deferred"]
