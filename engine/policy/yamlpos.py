"""Load YAML keeping the line and column of every value, keyed by JSON pointer.

Rule-file diagnostics must say ``rules/x.yaml:12:5``; PyYAML only keeps marks on the node
tree, so we compose nodes once and build plain data plus a pointer → position map.
"""
from __future__ import annotations

from typing import Any

import yaml

from kvrules.facts.jsontypes import pointer as make_pointer

Positions = dict[str, tuple[int, int]]


class YamlSyntaxError(Exception):
    """A YAML file that does not parse; carries a 1-based line and column."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line, self.column = line, column


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _convert(node: yaml.Node, path: str, positions: Positions) -> Any:
    positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(yaml.safe_load(yaml.serialize(key_node))) if not isinstance(
                key_node, yaml.ScalarNode) else key_node.value
            out[key] = _convert(value_node, f"{path}/{_escape(key)}", positions)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(n, f"{path}/{i}", positions) for i, n in enumerate(node.value)]
    constructor = yaml.SafeLoader("")
    return constructor.construct_object(node, deep=True)


def load_with_positions(text: str) -> tuple[Any, Positions]:
    """Parse one YAML document; returns (data, positions). Empty text gives None."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise YamlSyntaxError(str(exc.problem or exc), line, col) from None
    if node is None:
        return None, {}
    positions: Positions = {}
    return _convert(node, "", positions), positions


def position_of(positions: Positions, pointer: str) -> tuple[int, int]:
    """The position of the nearest enclosing node of ``pointer`` (1,1 if nothing matches)."""
    while True:
        if pointer in positions:
            return positions[pointer]
        if not pointer:
            return (1, 1)
        pointer = pointer.rsplit("/", 1)[0]


__all__ = ["load_with_positions", "position_of", "YamlSyntaxError", "make_pointer"]
