"""Turn schema-valid rule-file data into the policy model, keeping every location."""
from __future__ import annotations

from typing import Any

from kvrules.policy.operators import canonical_test
from kvrules.policy.model import Action, Atom, Expr, Loc, Parameter, Pattern, Policy, Ref, Rule
from kvrules.policy.yamlpos import Positions, position_of

CONNECTIVES = ("all", "any", "not")


class Located:
    """Positions of one file, to stamp model objects with (file, line, column)."""

    def __init__(self, file: str, positions: Positions) -> None:
        self.file, self.positions = file, positions

    def loc(self, pointer: str) -> Loc:
        line, col = position_of(self.positions, pointer)
        return (self.file, line, col)


def parse_operand(value: Any) -> Any:
    """A literal, or a Ref for ``{ref: alias.field}``."""
    if isinstance(value, dict) and set(value) == {"ref"}:
        alias, field = value["ref"].split(".", 1)
        return Ref(alias, field)
    return value


def parse_test(field: str, test: Any, ptr: str, at: Located, negated: bool) -> Expr:
    """One field test; a bare literal or ref means equality."""
    if isinstance(test, dict) and set(test) != {"ref"}:
        (op, operand), = test.items()
    else:
        op, operand = "eq", test
    op, operand, flip = canonical_test(op, parse_operand(operand))
    atom = Atom(field, op, operand, negated != flip, ptr, at.loc(ptr))
    return Expr("atom", atom=atom)


def parse_where(where: dict[str, Any], ptr: str, at: Located, negated: bool = False) -> Expr:
    """A where-mapping is a conjunction; ``not`` is pushed down to atoms (De Morgan)."""
    parts: list[Expr] = []
    for key, value in where.items():
        sub = f"{ptr}/{key}"
        if key == "all":
            kids = tuple(parse_where(v, f"{sub}/{i}", at, negated) for i, v in enumerate(value))
            parts.append(Expr("or" if negated else "and", kids))
        elif key == "any":
            kids = tuple(parse_where(v, f"{sub}/{i}", at, negated) for i, v in enumerate(value))
            parts.append(Expr("and" if negated else "or", kids))
        elif key == "not":
            parts.append(parse_where(value, sub, at, not negated))
        else:
            parts.append(parse_test(key, value, sub, at, negated))
    if len(parts) == 1:
        return parts[0]
    return Expr("or" if negated else "and", tuple(parts))


def parse_pattern(item: dict[str, Any], ptr: str, at: Located) -> Pattern:
    negated = "none" in item
    body, body_ptr = (item["none"], f"{ptr}/none") if negated else (item, ptr)
    where = body.get("where")
    expr = parse_where(where, f"{body_ptr}/where", at) if where else None
    return Pattern(fact=body["fact"], alias=body.get("as", body["fact"]), where=expr,
                   negated=negated, pointer=body_ptr, loc=at.loc(body_ptr))


def parse_action(item: dict[str, Any], ptr: str, at: Located) -> Action:
    (kind, args), = item.items()
    args = dict(args)
    if kind == "derive":
        args["set"] = {k: parse_operand(v) for k, v in args.get("set", {}).items()}
    elif kind in ("regime", "eligible"):
        args = {k: parse_operand(v) for k, v in args.items()}
    elif kind == "error" and "at" in args:
        alias, field = args["at"].split(".", 1)
        args["at"] = Ref(alias, field)
    return Action(kind, args, f"{ptr}/{kind}", at.loc(f"{ptr}/{kind}"))


def parse_rule(data: dict[str, Any], ptr: str, at: Located) -> Rule:
    then = data["then"] if isinstance(data["then"], list) else [data["then"]]
    then_ptr = f"{ptr}/then"
    actions = tuple(parse_action(a, f"{then_ptr}/{i}" if isinstance(data["then"], list)
                                 else then_ptr, at) for i, a in enumerate(then))
    patterns = tuple(parse_pattern(p, f"{ptr}/when/{i}", at)
                     for i, p in enumerate(data["when"]))
    return Rule(id=data["id"], description=data["description"], patterns=patterns,
                actions=actions, reason=data["reason"], loc=at.loc(ptr), pointer=ptr,
                file=at.file)


def parse_header(data: dict[str, Any], at: Located) -> Policy:
    params = {n: Parameter(n, p["type"], p["default"], p.get("description", ""))
              for n, p in data.get("parameters", {}).items()}
    derived = {n: {f: d["type"] for f, d in spec["fields"].items()}
               for n, spec in data.get("derived", {}).items()}
    return Policy(name=data["name"], version=data["version"],
                  description=data.get("description", ""), parameters=params,
                  qualifications=dict(data.get("qualifications", {})), derived=derived,
                  regimes=tuple(data.get("regimes", ())),
                  error_codes=tuple(data.get("error_codes", ())),
                  header_loc=at.loc("/policy"))
