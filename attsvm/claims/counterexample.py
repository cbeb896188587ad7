"""Counterexample files: the failing data set (``.npz``, the data-file format) and a ``.json`` beside it.

The JSON holds the claim id and file, the seed and budget, the float64 outcome, the high-precision
re-evaluation, the conclusion's extra draws (so the case can be replayed exactly) and two commands:
``replay`` (re-evaluate this saved case: ``attsvm check FILE --replay X.npz --only ID``) and ``rerun``
(re-run the search: ``attsvm check FILE --only ID --seed S``).

Both files are written together (:func:`attsvm.outputs.transaction`: both or neither). A description read back
is checked by :func:`validate` (required keys, their types, the encoding of the recorded draws, the data file
beside it and its sizes): any tampering is bad input, one line naming the file and the first problem.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np

from .. import outputs
from ..data import Dataset
from ..errors import InputError
from ..provenance import Provenance
from .verdict import VERDICTS, ClaimResult, jsonable

#: the keys of a counterexample description that :func:`validate` requires (:func:`save` writes all of them
#: and the advisory :data:`ADVISORY` ones, which are type-checked when present)
KEYS = (
    "claim",
    "origin",
    "file",
    "seed",
    "budget",
    "index",
    "verdict",
    "confirmed",
    "sizes",
    "data",
    "draws",
    "outcome",
    "high_precision",
)
ADVISORY = ("title", "reason", "commands", "confirmation_method", "runs", "provenance")


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


def provenance(res: ClaimResult) -> Provenance:
    """The provenance block of ``res``'s counterexample file: the search of one claim (seed, budget) and how its
    failure was decided."""
    how = f"confirmed ({res.confirmation_method or res.confirmed_how})" if res.confirmed else "not confirmed"
    what = f"claim {res.id}: {res.examples} examples searched, failure {how}"
    return Provenance.of("attsvm check", seed=res.seed, budget=res.budget, checks=[what])


def _region_of(case: Any) -> str | None:
    """The region spec the case's claim quantified over (the declared one or ``--region``'s), or None."""
    h = case.hypotheses
    return str(h.get("region")) if h is not None and "region" in h else None


def save(res: ClaimResult, out_dir: str | os.PathLike, name: str | None = None) -> Path | None:
    """Save ``res``'s failing case (if any) as ``<name>.npz`` + ``.json`` (default name ``<id>-seed<S>``); return
    the ``.npz`` path."""
    case = res.case
    if case is None:
        return None
    d = Path(out_dir)
    stem = d / (name or f"{slug(res.id)}-seed{res.seed}")
    npz = None if case.data is None else stem.with_suffix(".npz")
    info = {
        "claim": res.id,
        "title": res.title,
        "origin": res.origin,
        "file": res.module,
        "seed": res.seed,
        "budget": res.budget,
        "index": case.index,
        "runs": case.runs,
        "verdict": res.verdict,
        "reason": res.reason,
        "confirmed": res.confirmed,
        "confirmation_method": res.confirmation_method,
        "sizes": res.sizes,
        "data": None if npz is None else npz.name,
        "draws": encode_draw(list(case.draws)),
        "region": _region_of(case),
        "outcome": None,
        "high_precision": None,
        "commands": commands(res, npz),
        "provenance": provenance(res).to_dict(),
    }
    if res.outcome is not None:
        info["outcome"] = {"ok": bool(res.outcome.ok), "margin": jsonable(res.outcome.margin)}
        info["outcome"]["detail"] = jsonable(res.outcome.detail)
    if res.confirm_outcome is not None:
        c = res.confirm_outcome
        info["high_precision"] = {"ok": bool(c.ok), "margin": jsonable(c.margin), "detail": jsonable(c.detail)}
    js = stem.with_suffix(".json")
    with outputs.transaction():  # the data set and its description: both or neither
        if npz is not None:
            case.data.save(npz)
        outputs.write_text(js, json.dumps(info, indent=1))
    return npz if npz is not None else js


# ---------------------------------------------------------------------------------------------- schema
_NUMERIC_KINDS = "biufc"  # bool, int, unsigned, float, complex


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _tname(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(x), "a number" if _is_number(x) else type(x).__name__
    )


def _numbers_only(x: Any) -> bool:
    """A (nested) list of numbers / booleans / nulls, or one of them (what ``ndarray.tolist`` gives)."""
    if isinstance(x, list):
        return all(_numbers_only(v) for v in x)
    return x is None or isinstance(x, (int, float, bool))


def _draw_problem(x: Any, where: str) -> str | None:
    """The first problem of an encoded draw (:func:`encode_draw`), or None."""
    if isinstance(x, list):
        for i, v in enumerate(x):
            bad = _draw_problem(v, f"{where}[{i}]")
            if bad:
                return bad
        return None
    if isinstance(x, dict):
        if "__ndarray__" in x:
            if set(x) != {"__ndarray__", "dtype"}:
                return f"{where}: an encoded array has exactly the keys '__ndarray__' and 'dtype'"
            if not isinstance(x["dtype"], str):
                return f"{where}: 'dtype' must be a string, got {_tname(x['dtype'])}"
            try:
                dt = np.dtype(x["dtype"])
            except TypeError:
                return f"{where}: unknown dtype {x['dtype']!r}"
            if dt.kind not in _NUMERIC_KINDS:
                return f"{where}: dtype {x['dtype']!r} is not numeric"
            if not _numbers_only(x["__ndarray__"]):
                return f"{where}: '__ndarray__' must be a (nested) list of numbers"
            try:
                np.asarray(x["__ndarray__"], dtype=dt)
            except (TypeError, ValueError, OverflowError):
                return f"{where}: '__ndarray__' is not a rectangular array of {x['dtype']}"
            return None
        if "__dataset__" in x:
            if set(x) != {"__dataset__"} or not isinstance(x["__dataset__"], dict):
                return f"{where}: an encoded data set is {{'__dataset__': {{field: array, ...}}}}"
            try:
                decode_draw(x)
            except InputError as exc:
                return f"{where}: {exc}"
            except (TypeError, ValueError) as exc:
                return f"{where}: not a data set ({type(exc).__name__})"
            return None
        for k, v in x.items():
            bad = _draw_problem(v, f"{where}.{k}")
            if bad:
                return bad
        return None
    if x is None or isinstance(x, (str, int, float, bool)):
        return None
    return f"{where}: unexpected {_tname(x)}"  # pragma: no cover - json.loads gives no other types


def _outcome_problem(x: Any, key: str) -> str | None:
    if x is None:
        return None
    if not isinstance(x, dict):
        return f"'{key}' must be an object or null, got {_tname(x)}"
    if not isinstance(x.get("ok"), bool):
        return f"'{key}.ok' must be a boolean"
    m = x.get("margin")
    if not (m is None or _is_number(m) or isinstance(m, str)):
        return f"'{key}.margin' must be a number, got {_tname(m)}"
    return None


def validate(obj: Any, data: Dataset | None = None, npz_name: str | None = None) -> str | None:
    """The first problem of a counterexample description ``obj`` (the parsed JSON), or None when it is valid.

    Checked: an object with every key of :data:`KEYS` (those of :data:`ADVISORY` may be absent); ``claim`` a
    non-empty id; ``seed`` and ``index`` integers (``index`` >= 0); ``budget`` a positive number; ``verdict`` one
    of the verdicts; ``confirmed`` a boolean; ``data`` null or the bare name of a ``.npz`` file; ``sizes`` an
    object of positive integers (null exactly when ``data`` is); ``draws`` a list of encoded draws
    (:func:`encode_draw`: arrays with a numeric dtype and a rectangular payload, data sets that pass the
    data-file checks); ``outcome``/``high_precision`` null or ``{"ok": bool, "margin": ...}``; ``commands`` an
    object of strings; ``region`` (absent in files of earlier versions: the declared one) null or a region spec.
    With ``data`` (the loaded data set) the sizes must be its sizes; with ``npz_name`` (the
    file asked for) ``data`` must name it."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {_tname(obj)}"
    for k in KEYS:
        if k not in obj:
            return f"key {k!r} is missing (tampered, or written by another version: re-run the check to rewrite it)"
    cid = obj["claim"]
    if not isinstance(cid, str) or not cid or any(c.isspace() for c in cid):
        return f"'claim' must be a claim id (a non-empty string without spaces), got {cid!r}"
    for k in ("title", "origin", "reason"):
        if k in obj and not isinstance(obj[k], str):
            return f"{k!r} must be a string, got {_tname(obj[k])}"
    for k in ("file", "confirmation_method", "region"):
        if obj.get(k) is not None and not isinstance(obj[k], str):
            return f"{k!r} must be a string or null, got {_tname(obj[k])}"
    if not _is_int(obj["seed"]):
        return f"'seed' must be an integer, got {_tname(obj['seed'])}"
    if not _is_int(obj["index"]) or obj["index"] < 0:
        return f"'index' must be an integer >= 0, got {obj['index']!r}"
    b = obj["budget"]
    if not _is_number(b) or not (math.isfinite(b) and b > 0):
        return f"'budget' must be a positive number, got {b!r}"
    saved = tuple(v for v in VERDICTS if v != "proved")  # a saved case is a failure: never a proof
    if obj["verdict"] not in saved:
        return f"'verdict' must be one of {', '.join(saved)}, got {obj['verdict']!r}"
    if not isinstance(obj["confirmed"], bool):
        return f"'confirmed' must be a boolean, got {_tname(obj['confirmed'])}"
    name = obj["data"]
    if name is not None:
        if not isinstance(name, str) or Path(name).name != name or name in (".", "..") or not name.endswith(".npz"):
            return f"'data' must be the name of a .npz file beside the description, got {name!r}"
        if npz_name is not None and name != npz_name:
            return f"'data' names {name!r}, not {npz_name!r}"
    sizes = obj["sizes"]
    if sizes is not None:
        if not isinstance(sizes, dict) or not all(_is_int(v) and v > 0 for v in sizes.values()):
            return "'sizes' must be an object of positive integers or null"
    if (name is None) != (sizes is None):
        return "'sizes' and 'data' must both be given or both be null"
    if not isinstance(obj["draws"], list):
        return f"'draws' must be a list, got {_tname(obj['draws'])}"
    bad = _draw_problem(obj["draws"], "draws")
    if bad:
        return bad
    for k in ("outcome", "high_precision"):
        bad = _outcome_problem(obj[k], k)
        if bad:
            return bad
    if obj.get("runs") is not None and (not _is_int(obj["runs"]) or obj["runs"] < 1):
        return f"'runs' must be a positive integer or null, got {obj['runs']!r}"
    if "provenance" in obj and not isinstance(obj["provenance"], dict):
        return f"'provenance' must be an object, got {_tname(obj['provenance'])}"
    cmds = obj.get("commands", {})
    if not isinstance(cmds, dict) or not all(isinstance(v, str) for v in cmds.values()):
        return "'commands' must be an object of strings"
    if data is not None and sizes is not None:
        have = {"n": int(data.n), "T": int(data.T), "d": int(data.d)}
        if data.K is not None:
            have["K"] = int(data.K)
        if sizes != have:
            shown = ", ".join(f"{k}={v}" for k, v in have.items())
            return f"the data file {name} has sizes {shown}, the description says {sizes}"
    return None


def load(path: str | os.PathLike, claim_id: str | None = None) -> tuple[Dataset | None, dict[str, Any]]:
    """Load a saved counterexample (``.npz`` or its ``.json``): ``(data set, info)``, the description checked by
    :func:`validate` (any problem is an :class:`~attsvm.errors.InputError` naming the file). With ``claim_id``,
    first: a description of another claim is an InputError (``... belongs to claim X, not Y``)."""
    from ..data import load as load_data

    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.suffix not in (".npz", ".json"):
        raise InputError(f"{p}: not a counterexample (expected the .npz or its .json)")
    js = p if p.suffix == ".json" else p.with_suffix(".json")
    if not js.is_file():
        raise InputError(f"{p}: no counterexample description {js.name} beside it")
    try:
        info = json.loads(js.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{js}: not valid JSON ({exc.__class__.__name__})") from exc
    except OSError as exc:
        raise InputError(f"{js}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if claim_id is not None and isinstance(info, dict) and isinstance(info.get("claim"), str):
        if info["claim"] != claim_id:
            raise InputError(f"{js}: belongs to claim {info['claim']!r}, not {claim_id!r}")
    bad = validate(info, npz_name=p.name if p.suffix == ".npz" else None)
    if bad is not None:
        raise InputError(f"{js}: invalid counterexample description: {bad}")
    ds = None
    if info["data"] is not None:
        ds = load_data(js.parent / info["data"])
        bad = validate(info, data=ds)
        if bad is not None:
            raise InputError(f"{js}: invalid counterexample description: {bad}")
    return ds, info
