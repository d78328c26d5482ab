"""A Mongo-like query over a state (nested dicts), for ``state_matches``.

    {"session.refunded": true}                       equality on a dotted path
    {"session.amount": {"$gte": 10, "$lt": 100}}     operators on one path
    {"$or": [{"user.tier": "gold"}, {"session.vip": {"$exists": true}}]}
    {"session": {"escalation": {"$exists": true}}}   the nested form: the same as the dotted

A mapping whose keys are not operators descends, as seed 000's ``stateMatches`` writes
it: ``{session: {refunded: true}}`` is ``{session.refunded: true}`` (the other keys of
``session`` may be anything). To compare a whole mapping, use ``$eq``.

Operators: ``$eq``, ``$ne``, ``$in``, ``$nin``, ``$gt``, ``$gte``, ``$lt``, ``$lte``,
``$exists``, ``$regex``, ``$not`` (on a path's operators), and at the top ``$and``,
``$or``, ``$not``. ``check_query`` raises ValueError naming what is wrong, so a
malformed query is refused when the case is loaded, not in the middle of a run.
"""

from __future__ import annotations

from typing import Any

from cycle import patterns

FIELD_OPS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$regex", "$not")
TOP_OPS = ("$and", "$or", "$not")
#: what ``lookup`` returns for a path that is not there (None may be a value)
MISSING = object()


def lookup(doc: Any, path: str) -> Any:
    """The value at a dotted path of nested dicts, or ``MISSING``."""
    node = doc
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def _compare(op: str, value: Any, arg: Any) -> bool:
    if value is MISSING:
        return False
    try:
        return {"$gt": value > arg, "$gte": value >= arg, "$lt": value < arg,
                "$lte": value <= arg}[op]
    except TypeError:
        return False  # a text against a number: no match, as Mongo does


def _nested(spec: Any) -> bool:
    """A mapping of paths under this one (the nested form), not of operators."""
    return isinstance(spec, dict) and bool(spec) and not any(
        isinstance(k, str) and k.startswith("$") for k in spec)


def _field(value: Any, spec: Any) -> bool:
    if _nested(spec):  # {session: {refunded: true}} is {session.refunded: true}
        return isinstance(value, dict) and matches(value, spec)
    if not (isinstance(spec, dict) and spec and all(k.startswith("$") for k in spec)):
        return value is not MISSING and value == spec
    for op, arg in spec.items():
        if op == "$eq":
            ok = value is not MISSING and value == arg
        elif op == "$ne":
            ok = value is MISSING or value != arg
        elif op == "$in":
            ok = value is not MISSING and value in arg
        elif op == "$nin":
            ok = value is MISSING or value not in arg
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            ok = _compare(op, value, arg)
        elif op == "$exists":
            ok = (value is not MISSING) == bool(arg)
        elif op == "$regex":
            ok = isinstance(value, str) and patterns.search(arg, value) is not None
        else:  # $not
            ok = not _field(value, arg)
        if not ok:
            return False
    return True


def matches(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    """Whether ``doc`` satisfies ``query``."""
    for key, spec in query.items():
        if key == "$and":
            ok = all(matches(doc, q) for q in spec)
        elif key == "$or":
            ok = any(matches(doc, q) for q in spec)
        elif key == "$not":
            ok = not matches(doc, spec)
        else:
            ok = _field(lookup(doc, key), spec)
        if not ok:
            return False
    return True


def check_query(query: Any, where: str = "query") -> None:
    """Raise ValueError when ``query`` is not a query of this language."""
    if not isinstance(query, dict) or not query:
        raise ValueError(f"{where}: a query is a non-empty mapping of paths (or $and/$or/$not)")
    for key, spec in query.items():
        if key in ("$and", "$or"):
            if not isinstance(spec, list) or not spec:
                raise ValueError(f"{where}.{key}: a non-empty list of queries")
            for i, q in enumerate(spec):
                check_query(q, f"{where}.{key}[{i}]")
        elif key == "$not":
            check_query(spec, f"{where}.$not")
        elif key.startswith("$"):
            raise ValueError(f"{where}: unknown operator {key!r} at the top "
                             f"(use {', '.join(TOP_OPS)})")
        elif _nested(spec):
            check_query(spec, f"{where}.{key}")
        elif isinstance(spec, dict) and any(k.startswith("$") for k in spec):
            _check_ops(spec, f"{where}.{key}")


def _check_ops(spec: dict[str, Any], where: str) -> None:
    for op, arg in spec.items():
        if op not in FIELD_OPS:
            raise ValueError(f"{where}: unknown operator {op!r} (use {', '.join(FIELD_OPS)})")
        if op in ("$in", "$nin") and not isinstance(arg, list):
            raise ValueError(f"{where}.{op}: a list of values")
        if op == "$regex":
            try:
                patterns.compile_pattern(arg)
            except (patterns.error, TypeError) as e:
                raise ValueError(f"{where}.$regex: not a regular expression ({e})") from None
        if op == "$not":
            if not isinstance(arg, dict):
                raise ValueError(f"{where}.$not: a mapping of operators")
            _check_ops(arg, f"{where}.$not")
