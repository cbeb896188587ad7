"""What one reproduction produced (:class:`Report`), and its numbers as strict JSON (:func:`jsonable`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..serial import jsonable as _jsonable


def jsonable(x: Any) -> Any:
    """Numpy arrays/scalars to lists/numbers; non-finite floats to None (strict JSON)."""
    return _jsonable(x, nonfinite="null")


@dataclass
class Report:
    """What one reproduction produced: result numbers, failed qualitative checks, files, wall time."""

    name: str
    title: str
    result: dict[str, Any]
    failures: list[str]
    files: dict[str, str]
    wall_s: float

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "ok": self.ok,
            "failures": self.failures,
            "files": self.files,
            "wall_s": round(self.wall_s, 3),
        }
