"""The ids of the lint checks, in the order they run, without the checks themselves.

``kvrules rules check --help`` lists them at start-up, and importing the checks costs
~45 ms that every other command would pay; :data:`kvrules.authoring.lint.CHECKS` is built
from this tuple, so the ids are written once.
"""
CHECK_IDS = ("ref-types", "derive-types", "contradictory-conditions", "never-fires",
             "unused-derived-fact", "ambiguous-regime", "unreachable-step")
