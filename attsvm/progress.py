r"""The progress display on stderr shared by ``attsvm reproduce`` (:mod:`attsvm.experiments`) and ``attsvm gd``.

One rewritten line on a terminal, a line per ~10% of each stage otherwise. Options (defaults: the
``reproduce`` behaviour, every report shown at once):

* ``delay`` — nothing at all is shown until ``delay`` seconds after the display was made, so that short runs
  print nothing (``attsvm gd``: :data:`DELAY_ENV`, default 2 s);
* ``min_interval`` — on a terminal, redraw at most every ``min_interval`` seconds (the last report of a stage
  is always drawn);
* ``eta`` — append an estimate of the time left in the stage, $t_{\rm stage}\,(\text{total}-\text{done})/
  \text{done}$ ($t_{\rm stage}$: seconds since the stage's first report).

It only reads the counts it is given and the clock: it never changes what is being computed.
"""

from __future__ import annotations

import os
import sys
import time

from .errors import InputError

#: environment variable with the delay (seconds) before ``attsvm gd`` shows progress (default 2)
DELAY_ENV = "ATTSVM_PROGRESS_DELAY"


def delay_from_env(default: float = 2.0) -> float:
    """The delay of :data:`DELAY_ENV` (a non-negative number of seconds), else ``default``; InputError if malformed."""
    text = os.environ.get(DELAY_ENV)
    if text is None or not text.strip():
        return float(default)
    try:
        val = float(text)
    except ValueError as exc:
        raise InputError(f"{DELAY_ENV} must be a number of seconds, got {text!r}") from exc
    if not val >= 0 or val == float("inf"):
        raise InputError(f"{DELAY_ENV} must be a finite non-negative number of seconds, got {text!r}")
    return val


class Progress:
    """A progress display on stderr: one rewritten line on a terminal, a line per ~10% otherwise."""

    def __init__(
        self,
        name: str,
        enabled: bool = True,
        stream=None,
        *,
        delay: float = 0.0,
        min_interval: float = 0.0,
        eta: bool = False,
    ):
        self.name = name
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.delay = float(delay)
        self.min_interval = float(min_interval)
        self.eta = bool(eta)
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._t0 = time.perf_counter()
        self._last_decile: dict[str, int] = {}
        self._stage_t0: dict[str, float] = {}
        self._last_draw = -float("inf")
        self._open = False  # a terminal line drawn and not yet ended

    def update(self, stage: str, done: int, total: int) -> None:
        """Report ``done`` of ``total`` units of ``stage``."""
        if not self.enabled:
            return
        now = time.perf_counter()
        self._stage_t0.setdefault(stage, now)
        if now - self._t0 < self.delay:
            return
        total = max(int(total), 1)
        frac = min(max(done / total, 0.0), 1.0)
        finished = done >= total
        if self._tty and not finished and now - self._last_draw < self.min_interval:
            return
        msg = f"[{self.name}] {stage}: {done}/{total} ({100 * frac:3.0f}%) {now - self._t0:6.1f}s"
        if self.eta and 0 < done < total:
            msg += f", ETA {(now - self._stage_t0[stage]) * (total - done) / done:.1f}s"
        if self._tty:
            self.stream.write("\r\033[K" + msg + ("\n" if finished else ""))
            self._open = not finished
        else:
            dec = int(frac * 10)
            if self._last_decile.get(stage) == dec and not finished:
                return
            self._last_decile[stage] = dec
            self.stream.write(msg + "\n")
        self._last_draw = now
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.enabled:
            if self._tty:
                self.stream.write("\r\033[K")
                self._open = False
            self.stream.write(f"[{self.name}] {text}\n")
            self.stream.flush()

    def close(self) -> None:
        """End a terminal line left open by a stage that stopped before its total (e.g. every GD run stopped
        early); nothing otherwise."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
