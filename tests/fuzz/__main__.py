"""``python -m tests.fuzz --mutants N --seed S``: see tests/fuzz/README.md."""
import sys

from .run import main

sys.exit(main())
