r"""The progress display on stderr shared by ``attsvm reproduce`` (:mod:`attsvm.experiments`) and ``attsvm gd``.

One rewritten line on a terminal, a line per ~10% of each stage otherwise. Options (defaults: the
``reproduce`` behaviour, every report shown at once):

* ``delay`` — nothing at all is shown until ``delay`` seconds after the display was made, so that short runs
  print nothing (``attsvm gd``: :data:`DELAY_ENV`, default 2 s);
* ``min_interval`` — on a terminal, redraw at most every ``min_interval`` seconds (the last report of a stage
  is always drawn);
* ``eta`` — append an estimate of the time left in the stage, $t\,(\text{total}-\text{done})/
  (\text{done}-d_1)$, where $d_1>0$ is the count of the stage's first report of work done and $t$ the seconds
  since that report: the first stretch of work is not timed (it may hold a start-up cost, such as the compilation
  of the GD kernel), so no estimate is shown before the second report of work done.

:meth:`Progress.wait` says that a stage waits on something (``attsvm gd``: the compilation of the GD kernel, which
:func:`attsvm.gd.run` reports to a :meth:`Progress.stage` callback): its line shows that text instead of an
estimate until the stage reports work done — also when the wait outlasts the delay with no report in between (a
timer thread draws the line then).

It only reads the counts it is given and the clock: it never changes what is being computed.
"""

from __future__ import annotations

import os
import sys
import threading
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
        self._first_work: dict[str, tuple[float, int]] = {}  # (time, done) of the stage's first report of work done
        self._counts: dict[str, tuple[int, int]] = {}  # the stage's last (done, total)
        self._waiting: dict[str, str] = {}  # what a stage waits on (:meth:`wait`)
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()  # the timer thread draws too
        self._last_draw = -float("inf")
        self._open = False  # a terminal line drawn and not yet ended

    def update(self, stage: str, done: int, total: int) -> None:
        """Report ``done`` of ``total`` units of ``stage``."""
        if not self.enabled:
            return
        with self._lock:
            now = time.perf_counter()
            self._counts[stage] = (int(done), int(total))
            if done > 0:
                self._first_work.setdefault(stage, (now, int(done)))
                if self._waiting.pop(stage, None) is not None:
                    self._cancel_timer()
            if now - self._t0 < self.delay:
                return
            finished = done >= max(int(total), 1)
            if self._tty and not finished and now - self._last_draw < self.min_interval:
                return
            self._draw(stage, now, decile=True)

    def wait(self, stage: str, text: str) -> None:
        """``stage`` waits on ``text`` (e.g. ``"compiling the GD kernel"``): its line shows the text, and no estimate
        of the time left, until the stage reports work done; drawn now, or by a timer thread once the delay is over
        if the stage is still waiting then."""
        if not self.enabled:
            return
        with self._lock:
            self._waiting[stage] = str(text)
            left = self.delay - (time.perf_counter() - self._t0)
            if left <= 0:
                self._draw(stage, time.perf_counter(), decile=False)
                return
            self._cancel_timer()
            self._timer = threading.Timer(left, self._draw_waiting, args=(stage,))
            self._timer.daemon = True
            self._timer.start()

    def stage(self, stage: str) -> StageProgress:
        """A callback ``f(done, total)`` reporting to ``stage``, with ``f.wait(text)`` (the ``progress`` argument of
        :func:`attsvm.gd.run`)."""
        return StageProgress(self, stage)

    def _draw_waiting(self, stage: str) -> None:
        with self._lock:
            if stage in self._waiting:
                self._draw(stage, time.perf_counter(), decile=False)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _draw(self, stage: str, now: float, decile: bool) -> None:
        """Write the line of ``stage`` (``decile``: on a non-terminal, only when its 10% step changed)."""
        done, total = self._counts.get(stage, (0, 0))
        total = max(total, 1)
        frac = min(max(done / total, 0.0), 1.0)
        finished = done >= total
        if stage in self._counts:
            msg = f"[{self.name}] {stage}: {done}/{total} ({100 * frac:3.0f}%) {now - self._t0:6.1f}s"
        else:
            msg = f"[{self.name}] {stage}: {now - self._t0:6.1f}s"
        base = self._first_work.get(stage)
        if stage in self._waiting:
            msg += f", {self._waiting[stage]}..."
        elif self.eta and base is not None and base[1] < done < total:
            msg += f", ETA {(now - base[0]) * (total - done) / (done - base[1]):.1f}s"
        if self._tty:
            self.stream.write("\r\033[K" + msg + ("\n" if finished else ""))
            self._open = not finished
        else:
            dec = int(frac * 10)
            if decile and self._last_decile.get(stage) == dec and not finished:
                return
            if decile:  # (a waiting line does not stand for its 10% step)
                self._last_decile[stage] = dec
            self.stream.write(msg + "\n")
        self._last_draw = now
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.enabled:
            with self._lock:
                if self._tty:
                    self.stream.write("\r\033[K")
                    self._open = False
                self.stream.write(f"[{self.name}] {text}\n")
                self.stream.flush()

    def close(self) -> None:
        """End a terminal line left open by a stage that stopped before its total (e.g. every GD run stopped
        early), and stop a pending :meth:`wait` timer; nothing otherwise."""
        with self._lock:
            self._cancel_timer()
            self._waiting.clear()
            if self._open:
                self.stream.write("\n")
                self.stream.flush()
                self._open = False


class StageProgress:
    """``f(done, total)``: :meth:`Progress.update` of one stage; ``f.wait(text)``: :meth:`Progress.wait` of it."""

    def __init__(self, display: Progress, stage: str) -> None:
        self.display = display
        self.name = stage

    def __call__(self, done: int, total: int) -> None:
        self.display.update(self.name, done, total)

    def wait(self, text: str) -> None:
        self.display.wait(self.name, text)
