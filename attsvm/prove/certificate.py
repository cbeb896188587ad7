r"""Proof certificates: what anyone needs to re-check a proved region statement, and the coverage check.

A certificate (JSON, written atomically) holds the claim (id, file, constants), the data set (exact: every float
as ``float.hex``), the region (:meth:`Region.to_dict`), the root box, the method, and every leaf: its path (one bit
per split, 0 = lower half), the coordinate split at each level, its status (``proved`` / ``outside``) and the
enclosures that decided it (exact decimal strings of the balls' endpoints). The prover's own numbers are *not*
trusted by :func:`verify`: it rebuilds every leaf box from the root by exact halving along its path
(:func:`rebuild`), checks that the leaves tile the root box (:func:`coverage_problem`: every path's sibling
subtree is present, siblings share their split, no leaf is inside another), that the root box is the region's
bounding box, and re-decides every leaf with its own evaluation (a callable given by the caller: an independent
arithmetic, :mod:`attsvm.prove.verify`).

A tampered certificate — a leaf removed, a bound moved, a status changed — fails with one line naming the leaf
(its path and box).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from ..errors import InputError
from .boxes import split, to_fraction

FORMAT = "attsvm-proof-certificate/1"


def qparse(s: Any, where: str) -> Fraction:
    """The exact rational of :func:`attsvm.prove.boxes.fraction_text` text (an InputError naming ``where``
    otherwise)."""
    if not isinstance(s, str):
        raise InputError(f"{where}: expected an exact rational as text, got {type(s).__name__}")
    try:
        return to_fraction(s)
    except InputError:
        raise InputError(f"{where}: not an exact rational: {s!r}") from None


def box_text(lo: Iterable[Fraction], hi: Iterable[Fraction]) -> str:
    """``[l1, u1] x [l2, u2] ...`` with floats, for messages."""
    return " x ".join(f"[{float(a):.6g}, {float(b):.6g}]" for a, b in zip(lo, hi))


def rebuild(root_lo: tuple, root_hi: tuple, path: str, splits: list[int]) -> tuple[tuple, tuple]:
    """The box at ``path`` below the root: halve exactly at ``splits[k]`` and keep the lower (0) or upper (1)
    half, level by level."""
    lo, hi = tuple(root_lo), tuple(root_hi)
    for bit, j in zip(path, splits):
        lo, hi = split(lo, hi, j)[int(bit)]
    return lo, hi


def coverage_problem(leaves: list[dict[str, Any]], p: int) -> str | None:
    r"""Why the leaves (``{"path", "splits"}``) do not tile the root box exactly (None when they do): the paths
    must form a full binary prefix tree — every node is a leaf or has both children, siblings are split at the same
    coordinate — which tiles the root box because halving at an exact midpoint tiles a box."""
    split_at: dict[str, int] = {}
    paths = set()
    for lf in leaves:
        path, splits = lf["path"], lf["splits"]
        if not isinstance(path, str) or any(b not in "01" for b in path):
            return f"leaf {path!r}: a path is a string of 0 and 1"
        if not isinstance(splits, list) or len(splits) != len(path) or not all(isinstance(j, int) for j in splits):
            return f"leaf {path!r}: one split coordinate per level expected"
        if any(not 0 <= j < p for j in splits):
            return f"leaf {path!r}: a split coordinate outside 0..{p - 1}"
        if path in paths:
            return f"leaf {path!r} appears twice"
        paths.add(path)
        for k in range(len(path)):
            node = path[:k]
            if split_at.setdefault(node, splits[k]) != splits[k]:
                return f"leaf {path!r}: node {node!r} is split at two coordinates"
    for path in paths:
        for k in range(len(path)):
            if path[:k] in paths:
                return f"leaf {path!r} lies inside leaf {path[:k]!r}"
    internal = set(split_at)
    for node in internal:
        for child in (node + "0", node + "1"):
            if child not in paths and child not in internal:
                return f"the box at path {child!r} is missing (no leaf covers it)"
    if not paths:
        return "no leaves"
    return None


def write(path: str | os.PathLike, cert: dict[str, Any]) -> None:
    """Write a certificate atomically (:func:`attsvm.outputs.write_text`)."""
    from .. import outputs

    outputs.write_text(path, json.dumps(cert, indent=1) + "\n")


def read(path: str | os.PathLike) -> dict[str, Any]:
    """A certificate read back (an InputError for a missing, empty or malformed file, or another format)."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the certificate ({exc.strerror or type(exc).__name__})") from None
    if not text.strip():
        raise InputError(f"{path}: empty certificate")
    try:
        cert = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise InputError(f"{path}: not an attsvm proof certificate (format {FORMAT})")
    return cert


def check_leaves(
    cert: dict[str, Any],
    recheck: Callable[[dict[str, Any], tuple, tuple], str | None],
    on_leaf: Callable[[int, int], None] | None = None,
) -> str | None:
    """The first problem of a certificate's leaves (None when every check passes): the coverage
    (:func:`coverage_problem`), each leaf's box rebuilt from the root (a recorded box that differs is tampered),
    then ``recheck(leaf, lo, hi)`` of every leaf (the caller's independent re-decision: None when it holds)."""
    root = cert["root"]
    lo0 = tuple(qparse(x, "root.lo") for x in root["lo"])
    hi0 = tuple(qparse(x, "root.hi") for x in root["hi"])
    if len(lo0) != len(hi0) or any(a > b for a, b in zip(lo0, hi0)):
        return "the root box is malformed"
    leaves = cert["leaves"]
    if not isinstance(leaves, list):
        return "'leaves' must be a list"
    bad = coverage_problem(leaves, len(lo0))
    if bad:
        return bad
    for k, lf in enumerate(leaves):
        lo, hi = rebuild(lo0, hi0, lf["path"], lf["splits"])
        if "lo" in lf or "hi" in lf:
            rec_lo = tuple(qparse(x, f"leaf {lf['path']!r}") for x in lf.get("lo", []))
            rec_hi = tuple(qparse(x, f"leaf {lf['path']!r}") for x in lf.get("hi", []))
            if rec_lo != lo or rec_hi != hi:
                return f"leaf {lf['path']!r}: its recorded box is not the box at its path ({box_text(lo, hi)})"
        if lf.get("status") not in ("proved", "outside"):
            return f"leaf {lf['path']!r} ({box_text(lo, hi)}): status {lf.get('status')!r} proves nothing"
        why = recheck(lf, lo, hi)
        if why is not None:
            return f"leaf {lf['path']!r} ({box_text(lo, hi)}): {why}"
        if on_leaf is not None:
            on_leaf(k + 1, len(leaves))
    return None
