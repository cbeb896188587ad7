r"""The counterexample database: failures found are kept and replayed first on the next run.

Like Hypothesis's example database, but for attsvm's own cases (the data set *and* the conclusion's recorded
draws), so it survives edits anywhere else in a claim file: a refuted conjecture is refuted again at its first
example. Layout (default ``.attsvm/db`` in the working folder; ``attsvm check --db DIR``, ``--no-db``)::

    DIR/<claim id>/<digest>.npz    the failing data set (the data-file format)
    DIR/<claim id>/<digest>.json   the counterexample description (:mod:`.counterexample`)

``<digest>`` is a hash of the data and the draws (the same case is stored once). Before a universal claim is
searched, its entries are replayed, newest first: a failure that is confirmed again ends the check at once
(``refuted``, one example); an entry that passes now, or whose draws no longer fit the conclusion (it was
edited), is deleted; an unconfirmed failure stays and the search runs as usual. After the check, a failing
case (confirmed or unconfirmed) is stored. Empirical claims (seeded batches) do not use the database.

``DIR/.durations.json`` keeps the seconds each claim took when it last ran with the database, so that
``attsvm check -n N`` starts the longest claims first (:func:`attsvm.claims.runner.schedule`). The workers of a
parallel check replay and store the entries of their own claims (one claim: one folder, one process); every file
is written atomically (:mod:`attsvm.outputs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..outputs import check_output_dir, write_text
from .api import Claim, Outcome, outcome_error
from .case import Case, ReplayError
from .confirm import Confirmation, confirm
from .counterexample import decode_draw, encode_draw, load, save, slug
from .verdict import ClaimResult

DEFAULT = ".attsvm/db"
DURATIONS = ".durations.json"  # claim id -> seconds of its last run (a scheduling hint, not a result)


@dataclass
class Hit:
    """A stored case that fails again: the case, its float64 outcome, the confirmation and the file."""

    case: Case
    outcome: Outcome
    confirmation: Confirmation
    path: Path


class Database:
    """The folder ``path`` (created on the first write)."""

    def __init__(self, path: str | os.PathLike = DEFAULT):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r})"

    def check_writable(self) -> None:
        """Bad input (:class:`~attsvm.errors.InputError`, naming ``--db``) unless the folder exists or can be
        created and files can be written in it (:func:`attsvm.outputs.check_output_dir`; nothing is created)."""
        try:
            check_output_dir(self.path, "--db")
        except InputError as exc:
            raise InputError(f"{exc}; pass --no-db to run without the counterexample database") from None

    def folder(self, claim_id: str) -> Path:
        return self.path / slug(claim_id)

    def entries(self, claim_id: str) -> list[Path]:
        """The stored descriptions of ``claim_id``, newest first."""
        d = self.folder(claim_id)
        if not d.is_dir():
            return []
        return sorted(d.glob("*.json"), key=lambda f: (-f.stat().st_mtime, f.name))

    def store(self, res: ClaimResult) -> Path | None:
        """Store ``res``'s failing case (no-op without one); returns the ``.npz`` (or ``.json``) path."""
        case = res.case
        if case is None or res.outcome is None or res.outcome.ok:
            return None
        h = hashlib.sha256()
        if case.data is not None:
            for k, v in sorted(case.data.to_dict().items()):
                h.update(k.encode())
                h.update(repr(v.tolist() if hasattr(v, "tolist") else v).encode())
        h.update(json.dumps(encode_draw(list(case.draws)), sort_keys=True).encode())
        return save(res, self.folder(res.id), name=h.hexdigest()[:20])

    def durations(self) -> dict[str, float]:
        """The recorded seconds of each claim's last run (``{}`` when there is no record or it cannot be read: it
        is a hint for the order of a parallel run, never an input of a result)."""
        try:
            rec = json.loads((self.path / DURATIONS).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return {}
        if not isinstance(rec, dict):
            return {}
        return {
            str(k): float(v)
            for k, v in rec.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        }

    def record_durations(self, results: list[ClaimResult]) -> None:
        """Record the seconds of ``results`` (merged into the earlier record; written atomically). A record that
        cannot be written is skipped: the results of the run do not depend on it."""
        rec = self.durations()
        rec.update({r.id: round(float(r.seconds), 3) for r in results})
        with contextlib.suppress(InputError):
            write_text(self.path / DURATIONS, json.dumps(dict(sorted(rec.items())), indent=1) + "\n")

    def discard(self, js: Path) -> None:
        for f in (js, js.with_suffix(".npz")):
            f.unlink(missing_ok=True)

    def replay(self, claim: Claim, *, budget: float, device: str) -> Hit | None:
        """Replay ``claim``'s stored failures (module docstring); the first confirmed one, or None."""
        for js in self.entries(claim.id):
            try:
                ds, info = load(js, claim.id)
            except InputError as exc:
                raise InputError(f"counterexample database: {exc} (delete the entry, or pass --no-db)") from None
            case = Case(
                data=ds,
                hypotheses=claim.case_hypotheses,
                seed=info["seed"],
                device=device,
                budget=budget,
                index=info["index"],
                replay=decode_draw(info["draws"]),
            )
            try:
                out = claim.conclusion(case)
            except ReplayError:
                self.discard(js)  # the conclusion changed its draws: the stored case no longer applies
                continue
            except KeyboardInterrupt:
                raise
            except Exception:  # noqa: BLE001 - a claim error: the search meets and reports it with context
                continue
            if outcome_error(out) is not None or out.inconclusive or out.ok:
                self.discard(js)
                continue
            c = confirm(claim, case, out)
            if c.confirmed:
                return Hit(case, out, c, js)
            if c.status == "cleared":
                self.discard(js)
        return None


def open_database(path: str | os.PathLike | None) -> Database | None:
    """``Database(path)`` checked writable, or None for ``path=None`` (no database)."""
    if path is None:
        return None
    db = Database(path)
    db.check_writable()
    return db


__all__ = ["DEFAULT", "DURATIONS", "Database", "Hit", "open_database"]
