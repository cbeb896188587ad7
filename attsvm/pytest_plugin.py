r"""A pytest plugin: ``pytest --attsvm PATH`` checks claim files as pytest items, one item per claim.

Installed with the package (entry point ``pytest11``: ``attsvm = "attsvm.pytest_plugin"``). Without
``--attsvm`` it does nothing but register its options.

``--attsvm PATH`` (repeatable): a claim file or folder, as ``attsvm check PATH`` takes it (loaded by
:func:`attsvm.claims.discover`). Without positional test paths pytest collects only these paths (not the
project's ``testpaths``); with positional paths it collects both. Each claim becomes an item named by its id
(so ``pytest -k`` selects claims by id, file name, and — extra keywords — origin and kind) and runs
:func:`attsvm.claims.run_claim`; it passes exactly when ``attsvm check`` would exit 0 for that claim
(:attr:`~attsvm.claims.verdict.ClaimResult.matches`). A claim that does not match fails with its verdict, the
reason, the counterexample (sizes, float64 and high-precision margins, how it was confirmed, the saved file)
and the commands that replay and rerun it. Bad input (a path without claims, a claim file that fails to
import, hypotheses a strategy does not take, duplicate ids) is a collection error of one line.

Options:

* ``--attsvm-budget B``: ``ci`` | ``default`` | ``thorough`` | a number. Default: ``$ATTSVM_CHECK_BUDGET`` if
  set, else ``ci`` when ``$CI`` is true (``1``/``true``/``yes``), else ``default``.
* ``--attsvm-seed S``: the base seed (default 0), as ``attsvm check --seed``.
* ``--attsvm-out DIR``: where counterexamples are saved (default: ``attsvm-counterexamples*`` under pytest's
  basetemp, never the working folder).
* ``--attsvm-allow-inconclusive``: as ``attsvm check --allow-inconclusive`` (an unconfirmed failure still
  fails).

**Hypothesis settings.** The active profile (``hypothesis.settings.default``: a profile loaded by a conftest or
``--hypothesis-profile``) is read when each claim runs; of it the plugin honours exactly two settings, and only
for universal claims (the Hypothesis searches; an empirical claim's runs are one batched numpy sweep):

* ``max_examples``, when it differs from Hypothesis's default (100): the claim's example count, as
  ``attsvm check --examples N`` (a fixed count);
* ``derandomize=True`` (and ``max_examples`` unchanged): the claim runs its budget's full example count (a
  search never depends on the machine's speed: budgets are counts) (its ``ci_examples`` at the ``ci``
  budget, else ``max(5, round(b·examples))``).

The seed is always ``--attsvm-seed`` (``derandomize=False`` does not randomise it): a pinned verdict and a saved
counterexample belong to a seed. No other setting (``deadline``, ``database``, ``phases``, ...) applies; the
search keeps the settings of :mod:`attsvm.claims.search`.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HYPOTHESIS_DEFAULT_MAX_EXAMPLES = 100  # Hypothesis's own default for max_examples


@dataclass
class _State:
    """The plugin's configuration for one session (``config.stash``)."""

    targets: list[Path]
    budget_name: str
    budget: float
    seed: int
    out: Path | None
    allow_inconclusive: bool
    db: Any = None
    seen: dict[str, str] = field(default_factory=dict)  # claim id -> file (duplicates are bad input)

    def is_target(self, path: Path) -> bool:
        return _key(path) in {_key(t) for t in self.targets}

    def out_dir(self, config: pytest.Config) -> Path:
        """The counterexample folder (created on first use)."""
        if self.out is None:
            factory = getattr(config, "_tmp_path_factory", None)
            if factory is not None:
                self.out = factory.mktemp("attsvm-counterexamples", numbered=True)
            else:  # -p no:tmpdir
                self.out = Path(tempfile.mkdtemp(prefix="attsvm-counterexamples-"))
        self.out.mkdir(parents=True, exist_ok=True)
        return self.out


_STATE = pytest.StashKey[_State]()


def _key(path: str | os.PathLike) -> str:
    return os.path.normcase(str(Path(path).resolve()))


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--attsvm`` and its options."""
    g = parser.getgroup("attsvm", "attsvm executable claims (pytest --attsvm PATH)")
    g.addoption(
        "--attsvm",
        action="append",
        default=[],
        metavar="PATH",
        dest="attsvm_paths",
        help="check the claims in PATH (a claim file or folder; repeatable), one item per claim",
    )
    g.addoption(
        "--attsvm-budget",
        default=None,
        metavar="B",
        dest="attsvm_budget",
        help="ci | default | thorough | a number (default: $ATTSVM_CHECK_BUDGET, else ci when CI=true, else default)",
    )
    g.addoption("--attsvm-seed", type=int, default=0, metavar="S", dest="attsvm_seed", help="base seed (default 0)")
    g.addoption(
        "--attsvm-out",
        default=None,
        metavar="DIR",
        dest="attsvm_out",
        help="where counterexamples are saved (default: a folder under pytest's basetemp)",
    )
    g.addoption(
        "--attsvm-db",
        default=None,
        metavar="DIR",
        dest="attsvm_db",
        help="a counterexample database to replay first and store failures in (default: none, runs are hermetic)",
    )
    g.addoption(
        "--attsvm-allow-inconclusive",
        action="store_true",
        default=False,
        dest="attsvm_allow_inconclusive",
        help="an inconclusive verdict (other than an unconfirmed failure) does not fail its item",
    )


def pytest_configure(config: pytest.Config) -> None:
    """With ``--attsvm``: resolve the options and make the claim paths collection arguments."""
    paths = config.getoption("attsvm_paths", default=None)
    if not paths:
        return
    from .claims.runner import BUDGETS, resolve_budget
    from .errors import InputError

    raw = config.getoption("attsvm_budget") or os.environ.get("ATTSVM_CHECK_BUDGET") or ("ci" if _ci() else "default")
    try:
        b = resolve_budget(raw)
    except InputError as exc:
        raise pytest.UsageError(f"--attsvm-budget: {exc}") from None
    name = raw if raw in BUDGETS else f"{b:g}"
    here = config.invocation_params.dir
    targets = [Path(os.path.abspath(here / p)) for p in paths]
    out = config.getoption("attsvm_out")
    if out is not None:  # checked before collection, as attsvm check --out (attsvm.outputs)
        from .outputs import check_output_dir

        try:
            check_output_dir(os.path.abspath(here / out), "--attsvm-out")
        except InputError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[_STATE] = _State(
        targets=targets,
        budget_name=name,
        budget=b,
        seed=int(config.getoption("attsvm_seed")),
        out=None if out is None else Path(os.path.abspath(here / out)),
        allow_inconclusive=bool(config.getoption("attsvm_allow_inconclusive")),
    )
    db_dir = config.getoption("attsvm_db")
    if db_dir is not None:
        from .claims.database import open_database

        try:
            config.stash[_STATE].db = open_database(os.path.abspath(here / db_dir))
        except InputError as exc:
            raise pytest.UsageError(str(exc).replace("--db", "--attsvm-db")) from None
    extra = [str(t) for t in targets]
    # no positional paths: collect only the claims (not testpaths / the working folder); else both
    config.args = [*config.args, *extra] if config.getoption("file_or_dir") else extra


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    """Two lines: the budget, seed and counterexample folder; what the Hypothesis profile changes."""
    st = config.stash.get(_STATE, None)
    if st is None:
        return None
    where = str(st.out) if st.out is not None else "a folder under pytest's basetemp"
    return [
        f"attsvm: budget {st.budget_name} ({st.budget:g}), seed {st.seed}, counterexamples in {where}",
        f"attsvm: {hypothesis_note()}",
    ]


def hypothesis_note() -> str:
    """What the active Hypothesis profile changes (see the module docstring)."""
    s = _hypothesis_settings()
    if s is None:
        return "no Hypothesis profile"
    name, n, derand = s
    what = []
    if n != HYPOTHESIS_DEFAULT_MAX_EXAMPLES:
        what.append(f"max_examples={n} is the example count of universal claims")
    elif derand:
        what.append("derandomize=True: universal claims run their full example count")
    return f"Hypothesis profile {name!r}: " + ("; ".join(what) if what else "nothing changed (attsvm check defaults)")


def _hypothesis_settings() -> tuple[str, int, bool] | None:
    try:
        from hypothesis import settings
    except ImportError:  # pragma: no cover
        return None
    s = settings.default
    if s is None:  # pragma: no cover
        return None
    try:
        name = settings.get_current_profile_name()
    except Exception:  # pragma: no cover
        name = "?"
    return name, int(s.max_examples), bool(s.derandomize)


def examples_from_hypothesis(claim: Any, budget: float) -> int | None:
    """The example count the active Hypothesis profile asks for ``claim`` (None: ``attsvm check``'s budgeted
    count). See the module docstring."""
    from .claims.runner import examples_for, universal_examples

    s = _hypothesis_settings()
    if s is None or claim.kind != "universal":
        return None
    _, n, derand = s
    if n != HYPOTHESIS_DEFAULT_MAX_EXAMPLES:
        return n
    if derand:
        fixed = examples_for(claim, budget)
        return fixed if fixed is not None else universal_examples(claim, budget)
    return None


# ---------------------------------------------------------------------------------------------- collection
@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: the hook is new in pytest 8
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A folder given to ``--attsvm`` is a :class:`ClaimDir`."""
    st = parent.config.stash.get(_STATE, None)
    if st is not None and st.is_target(path):
        return ClaimDir.from_parent(parent, path=path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A ``.py`` file given to ``--attsvm`` is a :class:`ClaimFile` (not a test module)."""
    st = parent.config.stash.get(_STATE, None)
    if st is not None and st.is_target(module_path):
        return ClaimFile.from_parent(parent, path=module_path)
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A non-``.py`` file given to ``--attsvm``: a collection error (not a claim file)."""
    st = parent.config.stash.get(_STATE, None)
    if st is not None and file_path.suffix != ".py" and st.is_target(file_path):
        return ClaimFile.from_parent(parent, path=file_path)
    return None


def _load(node: pytest.Collector, path: Path) -> list[Any]:
    """The claims under ``path`` (discover, validated hypotheses, ids unique across the session)."""
    from .claims import discover
    from .claims.runner import validate
    from .errors import InputError

    claims = discover([path])
    for c in claims:
        validate(c)
    st = node.config.stash[_STATE]
    for c in claims:
        prev = st.seen.setdefault(c.id, str(c.module))
        if prev != str(c.module):
            raise InputError(f"duplicate claim id {c.id!r} in {prev} and {c.module}")
    return claims


def _input_error_line(node: pytest.Collector, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    from .errors import InputError

    if isinstance(excinfo.value, InputError):
        msg = str(excinfo.value).strip().splitlines()
        return f"attsvm: {msg[0] if msg else type(excinfo.value).__name__}"
    return None


class ClaimDir(getattr(pytest, "Directory", pytest.Collector)):  # pytest.Directory: pytest >= 8
    """A claim folder: discovered as ``attsvm check DIR`` discovers it; one :class:`ClaimFile` per file."""

    def collect(self) -> list[pytest.Collector]:
        by_file: dict[str, list[Any]] = {}
        for c in _load(self, self.path):
            by_file.setdefault(str(c.module), []).append(c)
        out = []
        for f, claims in by_file.items():
            node = ClaimFile.from_parent(self, path=Path(f))
            node.claims = claims
            out.append(node)
        return out

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        return _input_error_line(self, excinfo) or super().repr_failure(excinfo)


class ClaimFile(pytest.File):
    """A claim file: one :class:`ClaimItem` per module-level claim, in file order."""

    claims: list[Any] | None = None

    def collect(self) -> list[pytest.Item]:
        claims = self.claims if self.claims is not None else _load(self, self.path)
        return [ClaimItem.from_parent(self, name=c.id, claim=c) for c in claims]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        return _input_error_line(self, excinfo) or super().repr_failure(excinfo)


class ClaimMismatch(Exception):
    """Raised by :meth:`ClaimItem.runtest` when the verdict does not match the claim's expectation."""

    def __init__(self, result: Any):
        super().__init__(result.mismatch)
        self.result = result


class ClaimItem(pytest.Item):
    """One claim, checked by :func:`attsvm.claims.run_claim` under ``attsvm check``'s verdict policy."""

    def __init__(self, *, claim: Any, **kwargs: Any):
        super().__init__(**kwargs)
        self.claim = claim
        self.result: Any = None
        self.extra_keyword_matches.update({claim.origin, claim.kind})  # pytest -k: as attsvm check -k

    def runtest(self) -> None:
        from .claims import run_claim

        st = self.config.stash[_STATE]
        res = run_claim(
            self.claim,
            examples=examples_from_hypothesis(self.claim, st.budget),
            seed=st.seed,
            budget=st.budget,
            out=st.out_dir(self.config),
            allow_inconclusive=st.allow_inconclusive,
            db=st.db,
        )
        self.result = res
        self.user_properties.append(("attsvm_verdict", res.verdict))
        if not res.matches:
            raise ClaimMismatch(res)
        self.add_report_section(  # shown by -rP
            "call", "attsvm", f"{res.id}: {res.verdict} ({res.examples} examples, {res.seconds:.1f}s) - {res.reason}"
        )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        if isinstance(excinfo.value, ClaimMismatch):
            return failure_text(excinfo.value.result, self.config.stash[_STATE])
        from .errors import InputError

        if isinstance(excinfo.value, InputError):
            return f"attsvm: {str(excinfo.value).strip().splitlines()[0]}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"attsvm claim {self.claim.id}"


def failure_text(res: Any, st: _State | None = None) -> str:
    """The failure report of a claim whose verdict does not match: verdict, reason, the counterexample (sizes,
    margins, how it was confirmed, the saved file) and the replay / rerun commands."""
    import json

    from .claims.counterexample import commands
    from .claims.report import verdict_cell
    from .serial import jsonable

    lines = [
        f"claim {res.id} ({res.origin}, {res.kind}; expected {res.expected}): {res.mismatch}",
        f"  title: {res.title}",
        f"  verdict: {verdict_cell(res)}; {res.examples} examples, {res.seconds:.1f}s",
        f"  reason: {res.reason}",
    ]
    if res.error:
        lines.append(f"  error: {res.error}")
    if res.rate:
        r = res.rate
        lines.append(
            f"  rate: {r['successes']}/{r['decided']} decided runs of {r['runs']},"
            f" 95% CI [{r['lo']:.3f}, {r['hi']:.3f}], required {r['required']}"
        )
    case = res.case
    if case is not None and res.outcome is not None:
        ds = case.data
        sizes = res.sizes_text or "no data set"
        kind = "" if ds is None else f", kind {ds.kind}"
        lines.append(f"  counterexample: {sizes}{kind}, {len(case.draws)} further draw(s)")
        lines.append(f"    float64 margin: {res.outcome.margin:.6g}")
        if res.outcome.detail:
            lines.append(f"    float64 detail: {_short(json.dumps(jsonable(res.outcome.detail)))}")
        c = res.confirm_outcome
        if c is not None:
            state = "confirmed" if res.confirmed else ("inconclusive: " + str(c.inconclusive) if c.inconclusive else "")
            lines.append(f"    high-precision margin: {c.margin} {state}".rstrip())
            if c.detail:
                lines.append(f"    high-precision detail: {_short(json.dumps(jsonable(c.detail)))}")
        lines.append("    confirmed: " + (f"yes, by {res.confirmation_method}" if res.confirmed else "no"))
    if res.counterexample:
        saved = Path(res.counterexample)
        lines.append(f"  saved: {saved} (+ {saved.with_suffix('.json').name})")
    npz = Path(res.counterexample) if res.counterexample and res.counterexample.endswith(".npz") else None
    cmds = commands(res, npz)
    if "replay" in cmds:
        lines.append(f"  replay: {cmds['replay']}")
    budget = "" if st is None else f" --budget {st.budget_name}"
    lines.append(f"  rerun:  {cmds['rerun']}{budget}")
    return "\n".join(lines)


def _short(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."
