"""Load YAML keeping the line and column of every value, keyed by JSON pointer.

Rule-file diagnostics must say ``rules/x.yaml:12:5``; PyYAML only keeps marks on the node
tree, so we compose nodes once and build plain data plus a pointer → position map.

Nothing a rule file contains may crash or hang the loader, so a file is checked on the
event stream (which PyYAML parses without recursion) before any node tree is built:
nesting deeper than :data:`MAX_DEPTH`, aliases that refer to themselves, and aliases that
would expand to more than :data:`MAX_ALIAS_NODES` nodes ("billion laughs") are refused.
Only the plain JSON-like tags are accepted, and numbers the rule engine cannot represent
(``.inf``, ``.nan``, integers beyond int64) are refused where they are written. Every
problem is a :class:`YamlSyntaxError` with a 1-based line and column and a stable code.

PyYAML is imported by the functions that parse (~15 ms): a run whose compiled policy comes
from the cache parses no YAML and never imports it.
"""
from __future__ import annotations

import datetime
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvrules.facts.jsontypes import pointer as make_pointer
from kvrules.policy import codes

if TYPE_CHECKING:
    import yaml

Positions = dict[str, tuple[int, int]]

MAX_FILE_BYTES = 1024 * 1024
"""Largest rule file read (bytes): 1 MiB keeps loading well under a second."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences in one rule file."""
MAX_ALIAS_NODES = 10_000
"""Most nodes all aliases of one file may expand to together."""
INT64 = (-2**63, 2**63 - 1)
"""Integers the engine compares exactly (it saturates beyond int64)."""


@lru_cache(maxsize=1)
def loader() -> type:
    """libyaml when available: the pure-Python parser takes about 10 s per MiB."""
    import yaml
    found: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return found


_TAG = "tag:yaml.org,2002:"
COLLECTION_TAGS = {_TAG + "map", _TAG + "seq"}
SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null")}


class YamlSyntaxError(Exception):
    """A YAML file that cannot be loaded; carries a 1-based line and column and a code."""

    def __init__(self, message: str, line: int, column: int,
                 code: str = codes.RULE_YAML_ERROR) -> None:
        super().__init__(message)
        self.line, self.column, self.code = line, column, code


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _at(mark: Any) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _refuse(message: str, mark: Any, code: str = codes.RULE_YAML_ERROR) -> YamlSyntaxError:
    line, col = _at(mark)
    return YamlSyntaxError(message, line, col, code)


def _prescan(text: str) -> None:
    """Walk the event stream: bound depth and alias expansion, refuse recursive aliases."""
    sizes: dict[str, int] = {}     # anchor -> expanded node count
    stack: list[list[Any]] = []    # [anchor, node count so far]
    open_anchors: set[str] = set()
    alias_nodes = 0
    import yaml
    for event in yaml.parse(text, Loader=loader()):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise _refuse(f"nesting deeper than {MAX_DEPTH} levels", event.start_mark,
                              codes.RULE_LIMIT_ERROR)
            if event.anchor:
                open_anchors.add(event.anchor)
            stack.append([event.anchor, 1])
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, count = stack.pop()
            if anchor:
                sizes[anchor] = count
                open_anchors.discard(anchor)
        elif isinstance(event, yaml.ScalarEvent):
            count = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise _refuse(f"alias *{event.anchor} refers to the node that contains it "
                              "(recursive alias)", event.start_mark)
            if event.anchor not in sizes:
                raise _refuse(f"alias *{event.anchor} has no anchor &{event.anchor} before it",
                              event.start_mark)
            count = sizes[event.anchor]
            alias_nodes += count
            if alias_nodes > MAX_ALIAS_NODES:
                raise _refuse(f"aliases expand to more than {MAX_ALIAS_NODES} nodes",
                              event.start_mark, codes.RULE_LIMIT_ERROR)
        else:
            continue
        if stack:
            stack[-1][1] += count


def _scalar(node: yaml.ScalarNode, constructor: yaml.SafeLoader) -> Any:
    if node.tag not in SCALAR_TAGS:
        if node.tag == _TAG + "timestamp":
            raise _refuse(f"{node.value!r} reads as a date; quote it to make it a string",
                          node.start_mark, codes.RULE_VALUE_ERROR)
        raise _refuse(f"unsupported YAML tag {node.tag!r}; rule files hold plain "
                      "strings, numbers, booleans, null, lists and mappings", node.start_mark)
    value = constructor.construct_object(node, deep=True)
    if isinstance(value, float) and not math.isfinite(value):
        raise _refuse(f"{node.value!r} is not a finite number; the rule engine cannot "
                      "represent it", node.start_mark, codes.RULE_VALUE_ERROR)
    if isinstance(value, int) and not isinstance(value, bool) \
            and not INT64[0] <= value <= INT64[1]:
        raise _refuse(f"{node.value} is outside the 64-bit integer range the rule engine "
                      "compares exactly", node.start_mark, codes.RULE_VALUE_ERROR)
    if isinstance(value, (datetime.date, bytes)):  # pragma: no cover - excluded by tag
        raise _refuse("not a JSON value", node.start_mark, codes.RULE_VALUE_ERROR)
    return value


def _convert(node: yaml.Node, path: str, positions: Positions,
             constructor: yaml.SafeLoader) -> Any:
    import yaml
    positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, constructor)
    if node.tag not in COLLECTION_TAGS:
        raise _refuse(f"unsupported YAML tag {node.tag!r}; rule files hold plain "
                      "strings, numbers, booleans, null, lists and mappings", node.start_mark)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        seen: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _refuse("a mapping key must be a plain string", key_node.start_mark)
            if key_node.tag == _TAG + "merge":
                raise _refuse("merge keys (<<) are not supported in rule files",
                              key_node.start_mark)
            key = key_node.value
            if key in seen:
                line, _ = _at(seen[key])
                raise _refuse(f"duplicate key {key!r} (first at line {line})",
                              key_node.start_mark)
            seen[key] = key_node.start_mark
            out[key] = _convert(value_node, f"{path}/{_escape(key)}", positions,
                                constructor)
        return out
    return [_convert(n, f"{path}/{i}", positions, constructor)
            for i, n in enumerate(node.value)]


def _line_col(text: str, index: int) -> tuple[int, int]:
    """Line and column of a reader error; libyaml counts UTF-8 bytes, PyYAML characters."""
    import yaml
    if loader() is yaml.SafeLoader:
        line = text.count("\n", 0, index) + 1
        return line, index - (text.rfind("\n", 0, index) + 1) + 1
    data = text.encode("utf-8", "surrogatepass")
    head = data[:index]
    return head.count(b"\n") + 1, len(head[head.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1


def load_with_positions(text: str) -> tuple[Any, Positions]:
    """Parse one YAML document; returns (data, positions). Empty text gives None."""
    import yaml
    try:
        _prescan(text)
        node = yaml.compose(text, Loader=loader())
        if node is None:
            return None, {}
        positions: Positions = {}
        return _convert(node, "", positions, yaml.SafeLoader("")), positions
    except yaml.MarkedYAMLError as exc:
        line, col = _at(exc.problem_mark or exc.context_mark)
        problem = exc.problem or str(exc)
        if exc.context and exc.problem:
            problem = f"{exc.problem} ({exc.context})"
        if "maximum nesting depth" in problem:  # libyaml's own limit, met while scanning ahead
            raise YamlSyntaxError(f"nesting deeper than {MAX_DEPTH} levels", line, col,
                                  codes.RULE_LIMIT_ERROR) from None
        raise YamlSyntaxError(problem, line, col) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise YamlSyntaxError(f"character U+{exc.character:04X} is not allowed in a rule "
                              "file", line, col, codes.RULE_ENCODING_ERROR) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), 1, 1) from None
    except RecursionError:
        raise YamlSyntaxError(f"nesting too deep (at most {MAX_DEPTH} levels)", 1, 1,
                              codes.RULE_LIMIT_ERROR) from None


BOMS = ((b"\xef\xbb\xbf", "UTF-8 byte-order mark"), (b"\xff\xfe\x00\x00", "UTF-32 byte-order mark"),
        (b"\x00\x00\xfe\xff", "UTF-32 byte-order mark"), (b"\xff\xfe", "UTF-16 byte-order mark"),
        (b"\xfe\xff", "UTF-16 byte-order mark"))


def decode_rule_file(data: bytes) -> str:
    """Strict UTF-8 without a byte-order mark; anything else is a YamlSyntaxError."""
    if len(data) > MAX_FILE_BYTES:
        raise YamlSyntaxError(f"file is larger than {MAX_FILE_BYTES} bytes, the most a rule "
                              "file may hold", 1, 1, codes.RULE_LIMIT_ERROR)
    for bom, what in BOMS:
        if data.startswith(bom):
            raise YamlSyntaxError(f"file starts with a {what}; save it as UTF-8 without "
                                  "a BOM", 1, 1, codes.RULE_ENCODING_ERROR)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = data[:exc.start]
        line = head.count(b"\n") + 1
        col = len(head[head.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        raise YamlSyntaxError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); rule files "
                              "must be UTF-8", line, col, codes.RULE_ENCODING_ERROR) from None


def position_of(positions: Positions, pointer: str) -> tuple[int, int]:
    """The position of the nearest enclosing node of ``pointer`` (1,1 if nothing matches)."""
    while True:
        if pointer in positions:
            return positions[pointer]
        if not pointer:
            return (1, 1)
        pointer = pointer.rsplit("/", 1)[0]


__all__ = ["load_with_positions", "position_of", "decode_rule_file", "YamlSyntaxError",
           "make_pointer", "MAX_FILE_BYTES", "MAX_DEPTH", "MAX_ALIAS_NODES"]
