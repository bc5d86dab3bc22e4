"""Cost of verifying every cell with the reference evaluation, against the engine's.

Generates a corpus (``benchmarks/corpus.py``), prepares every cell as the pipeline does and
times, per cell, the engine's evaluation (supervised worker, as ``classify`` runs it) and the
reference evaluation plus the comparison; and the whole ``classify`` of the corpus::

    python benchmarks/bench_reference.py --cells 200 --shape diverse
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402

from kvrules.artifacts.discover import discover  # noqa: E402
from kvrules.artifacts.load import load_cell  # noqa: E402
from kvrules.backend import durable  # noqa: E402
from kvrules.facts.extract import extract_cell  # noqa: E402
from kvrules.pipeline import Classifier, compile_policy, prepare  # noqa: E402
from kvrules.policy import reference  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--shape", default="diverse", choices=corpus.SHAPES)
    ap.add_argument("--points", type=int, default=500)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = corpus.generate(Path(tmp), args.shape, args.cells, points=args.points)
        cp = compile_policy()
        started = time.perf_counter()
        cls = Classifier(cp)
        n = sum(1 for _ in cls.classify_stream(extract_cell(load_cell(r))
                                               for r in discover([str(root)])))
        cls.close()
        whole = time.perf_counter() - started
        backend = durable.Backend(cp)
        engine_s = ref_s = prep_s = 0.0
        differ = 0
        for ref in discover([str(root)]):
            t0 = time.perf_counter()
            prepared = prepare(cp, extract_cell(load_cell(ref)))
            t1 = time.perf_counter()
            prep_s += t1 - t0
            if not prepared.to_engine:
                continue
            ev, _ = backend.evaluate(prepared.facts, ref.cell_id)
            t2 = time.perf_counter()
            mine = reference.evaluate(cp, prepared.facts)
            differ += reference.first_difference(ev, mine) is not None
            t3 = time.perf_counter()
            engine_s += t2 - t1
            ref_s += t3 - t2
        backend.close()
    print(f"{n} cells ({args.shape}, {args.points} points/rank): classify {whole:.2f} s; "
          f"per cell without memo: load+extract+prepare {prep_s:.2f} s, engine {engine_s:.2f} s, "
          f"reference+compare {ref_s:.2f} s ({100 * ref_s / max(engine_s, 1e-9):.0f}% of the "
          f"engine; {100 * ref_s / max(whole + ref_s, 1e-9):.0f}% of classify+reference); "
          f"{differ} cells differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
