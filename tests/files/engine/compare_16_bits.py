"""durable-rules alone (no kvrules shim): which rules fire for each padded string (stdin)."""
import json
import sys

from durable.engine import Host

fired: list[str] = []
ACTIONS = {"eq": lambda c: fired.append("eq"), "mt": lambda c: fired.append("mt")}


class Quiet(Host):
    def _run(self):
        return None

    def get_action(self, name):
        return ACTIONS[name]


CONSTANT = "s:skip:abc"
host = Quiet({"t16": {"eq": {"all": [{"m": {"v": CONSTANT}}], "run": "eq"},
                      "mt": {"all": [{"m": {"$mt": {"v": "s:skip:abc.*"}}}], "run": "mt"}}})
out = {}
for n, pad in enumerate(json.loads(sys.stdin.read())):
    fired.clear()
    value = CONSTANT + pad
    try:
        host.assert_facts("t16", [{"id": "f", "sid": str(n), "v": value}])
    except Exception as exc:  # no rule matched: the engine refuses the fact
        assert "handle" in str(exc), exc
    out[str(len(value.encode("utf-8")))] = sorted(set(fired))
print(json.dumps(out))
