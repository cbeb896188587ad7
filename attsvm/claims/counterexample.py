"""Counterexample files: the failing data set (``.npz``, the data-file format) and a ``.json`` beside it.

The JSON holds the claim id and file, the seed and budget, the float64 outcome, the high-precision
re-evaluation, the conclusion's extra draws (so the case can be replayed exactly) and two commands:
``replay`` (re-evaluate this saved case: ``attsvm check FILE --replay X.npz --only ID``) and ``rerun``
(re-run the search: ``attsvm check FILE --only ID --seed S``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np

from ..data import Dataset
from ..errors import InputError
from .verdict import ClaimResult, jsonable


def encode_draw(x: Any) -> Any:
    """A recorded draw as JSON (arrays and data sets tagged so that replay restores them)."""
    if isinstance(x, Dataset):
        return {"__dataset__": {k: jsonable(v) for k, v in x.to_dict().items()}}
    if isinstance(x, np.ndarray):
        return {"__ndarray__": x.tolist(), "dtype": str(x.dtype)}
    if isinstance(x, (list, tuple)):
        return [encode_draw(v) for v in x]
    if isinstance(x, dict):
        return {str(k): encode_draw(v) for k, v in x.items()}
    return jsonable(x)


def decode_draw(x: Any) -> Any:
    if isinstance(x, dict):
        if "__ndarray__" in x:
            return np.asarray(x["__ndarray__"], dtype=x.get("dtype", "float64"))
        if "__dataset__" in x:
            from ..data import from_mapping

            return from_mapping({k: np.asarray(v) if k != "kind" else v for k, v in x["__dataset__"].items()})
        return {k: decode_draw(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_draw(v) for v in x]
    return x


def slug(s: str) -> str:
    """``s`` as a file-name part (anything but letters, digits, ``_ . -`` becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def commands(res: ClaimResult, npz: Path | None) -> dict[str, str]:
    mod = shlex.quote(str(res.module)) if res.module else ""
    out = {"rerun": f"attsvm check {mod} --only {res.id} --seed {res.seed}".replace("  ", " ")}
    if npz is not None:
        out["replay"] = f"attsvm check {mod} --replay {shlex.quote(str(npz))} --only {res.id}".replace("  ", " ")
    return out


def save(res: ClaimResult, out_dir: str | os.PathLike, name: str | None = None) -> Path | None:
    """Save ``res``'s failing case (if any) as ``<name>.npz`` + ``.json`` (default name ``<id>-seed<S>``); return
    the ``.npz`` path."""
    case = res.case
    if case is None:
        return None
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    stem = d / (name or f"{slug(res.id)}-seed{res.seed}")
    npz = None
    if case.data is not None:
        npz = case.data.save(stem.with_suffix(".npz"))
    info = {
        "claim": res.id,
        "title": res.title,
        "origin": res.origin,
        "file": res.module,
        "seed": res.seed,
        "budget": res.budget,
        "index": case.index,
        "verdict": res.verdict,
        "reason": res.reason,
        "confirmed": res.confirmed,
        "confirmation_method": res.confirmation_method,
        "sizes": res.sizes,
        "data": None if npz is None else npz.name,
        "draws": encode_draw(list(case.draws)),
        "outcome": None,
        "high_precision": None,
        "commands": commands(res, npz),
    }
    if res.outcome is not None:
        info["outcome"] = {"ok": bool(res.outcome.ok), "margin": jsonable(res.outcome.margin)}
        info["outcome"]["detail"] = jsonable(res.outcome.detail)
    if res.confirm_outcome is not None:
        c = res.confirm_outcome
        info["high_precision"] = {"ok": bool(c.ok), "margin": jsonable(c.margin), "detail": jsonable(c.detail)}
    js = stem.with_suffix(".json")
    tmp = js.with_name(js.name + ".tmp-attsvm")
    tmp.write_text(json.dumps(info, indent=1))
    os.replace(tmp, js)
    return npz if npz is not None else js


def load(path: str | os.PathLike) -> tuple[Dataset | None, dict[str, Any]]:
    """Load a saved counterexample (``.npz`` or its ``.json``): ``(data set, info)``."""
    from ..data import load as load_data

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    js = p if p.suffix == ".json" else p.with_suffix(".json")
    if not js.exists():
        raise InputError(f"{p}: no counterexample description {js.name} beside it")
    try:
        info = json.loads(js.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{js}: not valid JSON ({exc.__class__.__name__})") from exc
    if not isinstance(info, dict) or "claim" not in info:
        raise InputError(f"{js}: not a counterexample description (no 'claim' field)")
    ds = None
    if info.get("data"):
        ds = load_data(js.parent / info["data"])
    return ds, info
