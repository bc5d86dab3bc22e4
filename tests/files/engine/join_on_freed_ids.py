"""A join on a fact id with every engine text freed once its call returns (see
tests/test_engine_strings.py): ``guarded`` lowers it as kvrules does (on ``fid``), ``bare``
on ``id``; ``kept`` keeps the texts alive. Prints how many of N sessions fired the join."""
import json, sys
from kvrules.backend.durable import encode, host as h, lower
from kvrules.policy.model import Atom, Expr, Pattern, Ref


class Forget(list):
    """Keeps no text: each is freed as soon as the engine call returns."""

    def append(self, item):
        return None


guarded = sys.argv[1] == "guarded"
if sys.argv[3:] != ["kept"]:
    h._KEPT[:] = [Forget()]
join = Pattern("b", "b", Expr("atom", atom=Atom("ref", "eq", Ref("a", "id"))), False, "",
               ("", 0, 0))
(variant,) = lower.pattern_variants(join)
if not guarded:  # the join as it was lowered before: on the engine's dangling id
    variant = json.loads(json.dumps(variant).replace('"fid', '"id'))
fired = []
rules = {"j": {"all": [{"a": {"fact_": "a"}}, variant], "run": "j"},
         "open": {"all": [{"x": {"fact_": "open"}}], "run": "noop"}}
eng = h.host()
eng.register("uaf", rules, {"j": lambda c: fired.append(c.b["id"]), "noop": lambda c: None})
for n in range(int(sys.argv[2])):
    sid = str(n + 1)
    eng.assert_fact("uaf", dict(encode.encode_fact("open", f"o{n}", {}, frozenset()), sid=sid))
    eng.assert_fact("uaf", dict(encode.encode_fact("a", f"a{n}", {}, frozenset()), sid=sid))
    churn = [json.dumps({"x": "y" * k}) for k in range(200)]  # reuse freed memory
    b = encode.encode_fact("b", f"b{n}", {"ref": f"a{n}"}, frozenset())
    eng.assert_fact("uaf", dict(b, sid=sid))
    eng.delete_state("uaf", sid)
print(len(fired))
