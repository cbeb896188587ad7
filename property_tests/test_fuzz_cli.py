"""The permanent fuzz suite: malformed and extreme data files and option values for every command.

Hypothesis writes a data file (valid, extreme, or broken in one or more of many ways) and draws option values,
then runs the command in-process through :func:`attsvm.cli.main`. Every run must end in one of three ways:

* exit 0 with a finite, right answer (strict JSON without NaN/inf; a solution satisfies its constraints when
  re-evaluated at 40 digits; a GD run is finite);
* exit 1 with a stated verdict (infeasible with a Farkas certificate, a non-finite GD run named, a failed
  certificate), or
* exit 2 with one ``error:`` line on stderr (``warning:`` lines may precede it) and nothing on stdout;

never an exception escaping ``main`` (a traceback), and never a partial or temporary file left in the folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from attsvm.cli import main


def fuzz(scale: float = 2.0) -> settings:
    """Settings of a fuzz test: ``scale`` times the profile's example count (CI: derandomised)."""
    return settings(
        max_examples=max(5, int(settings.default.max_examples * scale)),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        deadline=None,
    )


# --------------------------------------------------------------------------------------------- running
def run_cli(argv: list[str], cwd: Path, record: bool = True) -> tuple[int, str, str]:
    """``attsvm ARGV`` in-process in ``cwd``: (exit code, stdout, stderr). An exception escaping ``main`` is
    the failure this suite looks for, so it is not caught (argparse's SystemExit is)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse usage errors exit 2 with one line
            rc = exc.code if isinstance(exc.code, int) else 2
    if record:
        # --hypothesis-show-statistics: how often each outcome (and which error) was reached
        event(f"{argv[0]} exit {rc}" + (" " + err.getvalue().strip()[:50] if rc else ""))
    return rc, out.getvalue(), err.getvalue()


def run_checked(argv: list[str], folder: Path, outputs: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """:func:`run_cli` in ``folder``, then :func:`assert_contract` on the result."""
    before = {str(p.relative_to(folder)) for p in folder.rglob("*")}
    rc, out, err = run_cli(argv, folder)
    assert_contract(rc, out, err, before, folder, outputs)
    return rc, out, err


def _strict_json(text: str):
    def bad(tok):
        raise AssertionError(f"non-finite number {tok} in JSON output")

    return json.loads(text, parse_constant=bad)


def assert_contract(rc: int, out: str, err: str, before: set[str], folder: Path, outputs: tuple[str, ...] = ()):
    """Exit codes and messages as the README states them, and no partial files."""
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if rc == 2:
        errors = [ln for ln in lines if not ln.startswith("warning:")]
        assert len(errors) == 1 and errors[0].startswith("error: "), err
        assert out == "", out
    after = {str(p.relative_to(folder)) for p in folder.rglob("*")}
    new = after - before
    assert not [p for p in new if ".tmp" in p or p.endswith("~")], new
    if rc == 2:
        assert not (new & set(outputs)), f"output written although the command failed: {new & set(outputs)}"


# --------------------------------------------------------------------------------------------- data files
SCALES = st.sampled_from([1e-310, 1e-300, 1e-200, 1e-154, 1e-20, 1.0, 1e20, 1e154, 1e200, 1e300, 1e307, 2.0**-1000])


@st.composite
def base_arrays(draw, kinds=("cross", "self", "sequence", "causal")):
    """A valid data mapping (independent Gaussian draws: distinct tokens, no ties with probability one)."""
    kind = draw(st.sampled_from(kinds))
    n, T, d = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    m: dict = {"X": rng.standard_normal((n, T, d)), "v": rng.standard_normal(d), "kind": np.array(kind)}
    if kind == "cross":
        m["Z"], m["Y"] = rng.standard_normal((n, d)), rng.choice([-1.0, 1.0], n)
    elif kind == "self":
        m["query_index"], m["Y"] = np.array(draw(st.integers(0, T - 1))), rng.choice([-1.0, 1.0], n)
    elif kind == "sequence":
        K = draw(st.integers(1, 2))
        m["Z"], m["Y"] = rng.standard_normal((n, K, d)), rng.choice([-1.0, 1.0], (n, K))
    else:
        m["Y"] = rng.choice([-1.0, 1.0], (n, T))
    return m


def _retype(a: np.ndarray, to: str) -> np.ndarray:
    """The array with another dtype (complex, int, bool, str, float32, object); a non-numeric array stays."""
    if a.dtype.kind not in "biufc":
        return a
    if to == "complex":
        return a + 1e-3j
    if to == "int":
        return np.round(a).astype(np.int64)
    if to == "bool":
        return a > 0
    return a.astype({"str": str, "float32": np.float32, "object": object}[to])


def _reshape(a: np.ndarray, how: str) -> np.ndarray:
    """The array with a wrong shape: an axis dropped or added, an empty axis, a scalar, transposed."""
    if a.ndim == 0:  # an earlier mutation made it a scalar: "drop" and "empty" give an empty vector
        a = a.reshape(1)
    if how == "drop":
        return a.reshape(-1) if a.ndim > 1 else a[:0]
    if how == "add":
        return a[None]
    if how == "empty":
        return a[..., :0]
    if how == "scalar":
        return np.array(1.0)
    return a.T


MUTATIONS = (
    "scale",
    "nonfinite",
    "dtype",
    "shape",
    "labels",
    "alpha",
    "tie",
    "near_tie",
    "duplicate_tokens",
    "extra_field",
    "missing_field",
    "kind",
    "query_index",
)


@st.composite
def mutated(draw, kinds=("cross", "self", "sequence", "causal"), max_mutations=2):
    """(mapping, list of mutation names): a data mapping with up to ``max_mutations`` things done to it."""
    m = draw(base_arrays(kinds))
    done = []
    for _ in range(draw(st.sampled_from([0, 0, *range(1, max_mutations + 1)]))):
        what = draw(st.sampled_from(MUTATIONS))
        if what in ("labels", "alpha", "tie", "near_tie", "duplicate_tokens") and not {"X", "Y", "v"} <= set(m):
            continue  # a field these mutations edit was removed by an earlier mutation
        done.append(what)
        fields = [f for f in ("X", "Z", "v") if f in m]
        if not fields and what in ("scale", "nonfinite", "dtype", "shape"):
            continue
        if what == "scale":
            f = draw(st.sampled_from(fields))
            with np.errstate(over="ignore", under="ignore"):  # an overflow to inf is one of the bad inputs
                m[f] = np.asarray(m[f], dtype=np.float64) * draw(SCALES)
        elif what == "nonfinite":
            f = draw(st.sampled_from([*fields, *(["Y"] if "Y" in m else [])]))
            a = np.array(m[f], dtype=np.float64)
            if a.size == 0:  # an earlier mutation emptied it: nothing to overwrite
                continue
            a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
            m[f] = a
        elif what == "dtype":
            f = draw(st.sampled_from([*fields, *(["Y"] if "Y" in m else [])]))
            to = draw(st.sampled_from(["complex", "int", "bool", "str", "float32", "object"]))
            m[f] = _retype(np.asarray(m[f]), to)
        elif what == "shape":
            f = draw(st.sampled_from([*fields, *(["Y"] if "Y" in m else [])]))
            how = draw(st.sampled_from(["drop", "add", "empty", "scalar", "transpose"]))
            m[f] = _reshape(np.asarray(m[f]), how)
        elif what == "labels":
            y = np.array(m["Y"], dtype=np.float64)
            if y.size == 0:  # an earlier mutation emptied the labels
                continue
            y.flat[draw(st.integers(0, y.size - 1))] = draw(st.sampled_from([0.0, 2.0, 0.5, -3.0]))
            m["Y"] = y
        elif what == "alpha":
            shape = np.shape(m["Y"])
            how = draw(st.sampled_from(["valid", "range", "float", "shape", "negative"]))
            T = np.shape(m["X"])[-2] if np.ndim(m["X"]) >= 2 else 1
            ints = np.asarray(draw(st.lists(st.integers(0, max(T - 1, 0)), min_size=1, max_size=8)))
            a = np.resize(ints, shape).astype(np.int64)
            if how == "range":
                a.flat[0] = T + draw(st.integers(0, 3))
            elif how == "float":
                a = a.astype(np.float64) + draw(st.sampled_from([0.0, 0.5]))
            elif how == "shape":
                a = a.reshape(-1)[:-1] if a.size > 1 else np.zeros((2, 2), np.int64)
            elif how == "negative":
                a.flat[0] = -1
            m["alpha"] = a
        elif what in ("tie", "near_tie", "duplicate_tokens"):
            X = np.array(m["X"], dtype=np.float64)
            if X.ndim == 3 and X.shape[1] >= 2:
                if what == "duplicate_tokens":
                    X[0, 1] = X[0, 0]
                else:  # token 1 of input 0 gets token 0's score (+ 1 ulp-ish for a near-tie), distinct token
                    v = np.asarray(m["v"], dtype=np.float64).reshape(-1)
                    if v.shape[0] == X.shape[2] and np.all(np.isfinite(v)) and v @ v > 0:
                        gap = 0.0 if what == "tie" else 4e-16
                        X[0, 1] = X[0, 1] - ((X[0, 1] - X[0, 0]) @ v - gap) / (v @ v) * v
            m["X"] = X
        elif what == "extra_field":
            m["extra"] = np.zeros(2)
        elif what == "missing_field":
            m.pop(draw(st.sampled_from(sorted(k for k in m if k != "kind") or ["X"])), None)
        elif what == "kind":
            m["kind"] = np.array(draw(st.sampled_from(["bogus", "self", "cross", "causal", "sequence", ""])))
        elif what == "query_index":
            m["query_index"] = np.array(draw(st.sampled_from([-1, 99, 0.5, "a"])))
    return m, done


@st.composite
def data_file(draw, folder: Path, kinds=("cross", "self", "sequence", "causal"), max_mutations=2):
    """Write a (possibly broken) data file into ``folder``; return (path name, mapping or None, mutations)."""
    m, done = draw(mutated(kinds, max_mutations))
    broken = ["truncated", "garbage", "empty", "json_list", "dir", "absent"]
    fmt = "npz" if draw(st.integers(0, 3)) < 3 else draw(st.sampled_from(["json", "json", *broken]))
    name = f"data.{'json' if fmt.startswith('json') else 'npz'}"
    path = folder / name
    if fmt == "npz":
        np.savez(path, **m)
    elif fmt == "json":
        try:
            text = json.dumps({k: np.asarray(v).tolist() for k, v in m.items()})
        except TypeError:  # complex values have no JSON form: write the file as .npz instead
            np.savez(path.with_suffix(".npz"), **m)
            return path.with_suffix(".npz").name, m, [*done, "npz"]
        path.write_text(text)
    elif fmt == "truncated":
        buf = io.BytesIO()
        np.savez(buf, **m)
        raw = buf.getvalue()
        path.write_bytes(raw[: draw(st.integers(1, max(1, len(raw) - 1)))])
    elif fmt == "garbage":
        path.write_bytes(draw(st.binary(min_size=1, max_size=64)))
    elif fmt == "empty":
        path.write_bytes(b"")
    elif fmt == "json_list":
        path.write_text("[1, 2, 3]")
    elif fmt == "dir":
        path.mkdir()
    return name, (m if fmt in ("npz", "json") else None), [*done, fmt]


# --------------------------------------------------------------------------------------------- right answers
def _margins_ok(m: dict, W: list, alpha: list) -> bool:
    """Att-SVM feasibility of the reported W re-evaluated at 40 digits on the data as written (cross kind):
    (x_{i,alpha_i} - x_it)^T W z_i >= 1 - 1e-6 for every t != alpha_i."""
    with mpmath.workdps(40):
        X, Z = np.asarray(m["X"], dtype=np.float64), np.asarray(m["Z"], dtype=np.float64)
        Wm = mpmath.matrix([[mpmath.mpf(float(w)) for w in row] for row in W])
        for i in range(X.shape[0]):
            z = mpmath.matrix([mpmath.mpf(float(c)) for c in Z[i]])
            Wz = Wm * z
            xa = X[i, alpha[i]]
            for t in range(X.shape[1]):
                if t == alpha[i]:
                    continue
                diff = [mpmath.mpf(float(a)) - mpmath.mpf(float(b)) for a, b in zip(xa, X[i, t])]
                if sum(dv * Wz[k] for k, dv in enumerate(diff)) < 1 - mpmath.mpf("1e-6"):
                    return False
    return True


# --------------------------------------------------------------------------------------------- commands
LR = st.sampled_from(["0.1", "1/L", "1e308", "1e300", "0", "-1", "nan", "inf", "1e-320", "abc", "2"])
FLOAT_TEXTS = ["1", "2", "0.5", "-1", "0", "nan", "inf", "3", "1e308", "x"]
FLOATS = st.sampled_from(FLOAT_TEXTS)


@fuzz(3.0)
@given(data=st.data())
def test_solve_never_crashes(data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        name, m, done = data.draw(data_file(folder))
        argv = ["solve", name]
        norm = data.draw(st.sampled_from(["fro"] * 4 + ["nuc", "lq", "bogus"]))
        argv += ["--norm", norm]
        if norm == "lq":
            argv += ["--q", data.draw(st.sampled_from(["2", "3", "1.5", *FLOAT_TEXTS]))]
        elif data.draw(st.integers(0, 5)) == 5:
            argv += ["--q", data.draw(FLOATS)]
        program = data.draw(st.sampled_from(["attsvm"] * 5 + ["gensvm", "seq", "causal", "prompt", "relaxed", "head"]))
        argv += ["--program", program]
        if data.draw(st.integers(0, 3)) == 3:
            argv += ["--alpha", data.draw(st.sampled_from(["opt", "0", "0,0,0", "1,0,2", "9", "-1", "a,b", "0.5"]))]
        if norm == "fro" and data.draw(st.booleans()):
            argv.append("--certify")
        argv.append("--json")
        rc, out, err = run_checked(argv, folder)
        if rc == 0:
            obj = _strict_json(out)
            sols = obj.get("solutions", [obj])
            assert all(s["status"] == "optimal" for s in sols)
            if m is not None and program == "attsvm":
                kind = str(np.asarray(m.get("kind", "cross")))
                if kind == "cross" and "Z" in m and np.ndim(m["X"]) == 3:
                    for s in sols:
                        assert _margins_ok(m, s["W"], s["alpha"]), (argv, done)


@fuzz()
@given(data=st.data())
def test_gd_never_crashes(data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        name, m, done = data.draw(data_file(folder))
        param = data.draw(st.sampled_from(["W", "W", "KQ", "p", "vp"]))
        algo = data.draw(st.sampled_from(["ngd", "ngd", "gd", "md"]))
        argv = ["gd", name, "--param", param, "--algo", algo, "--steps", data.draw(st.sampled_from(["0", "3", "20"]))]
        rare = lambda: data.draw(st.integers(0, 4)) == 4  # noqa: E731  (one option in five is drawn)
        argv += ["--lr", data.draw(LR) if rare() else data.draw(st.sampled_from(["0.1", "1", "1/L"]))]
        if algo == "md":
            argv += ["--q", data.draw(st.sampled_from(["2", "3", "1.5"])) if not rare() else data.draw(FLOATS)]
        elif rare():
            argv += ["--q", data.draw(FLOATS)]
        if rare():
            argv += ["--ridge", data.draw(FLOATS)]
        if rare():
            argv += ["--init", data.draw(st.sampled_from(["zero", "random", "missing.npy"]))]
        if rare():
            argv += ["--alpha", data.draw(st.sampled_from(["opt", "0,0,0", "1,0,2", "5", "x"]))]
        argv.append("--json")
        rc, out, err = run_checked(argv, folder)
        if rc == 0:
            obj = _strict_json(out)
            for r in obj["runs"]:
                assert r["stop_reason"] != "non-finite"
                assert np.isfinite(r["loss"]) and np.isfinite(r["norm"])
                for k in ("W", "K", "Q", "p", "v"):
                    if k in r:
                        assert r[k] is not None and np.all(np.isfinite(np.asarray(r[k], dtype=np.float64)))
        if rc == 1:
            assert "non-finite" in err or "error:" in err, err


@fuzz()
@given(data=st.data())
def test_derive_kkt_never_crashes(data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        name, m, done = data.draw(data_file(folder, kinds=("cross", "self")))
        argv = ["derive", "kkt", "--data", name]
        if data.draw(st.booleans()):
            argv += ["--alpha", data.draw(st.sampled_from(["0,0,0", "1,0,2", "0", "7", "x", "0.5"]))]
        outputs: tuple[str, ...] = ()
        target = data.draw(st.sampled_from(["none", "latex", "markdown", "bad_folder", "json"]))
        if target == "latex":
            argv += ["--latex", "out.tex"]
            outputs = ("out.tex",)
        elif target == "markdown":
            argv += ["--markdown", "out.md"]
            outputs = ("out.md",)
        elif target == "bad_folder":
            (folder / "afile").write_text("x")
            argv += ["--latex", "afile/out.tex"]
        else:
            argv += ["--json"] if target == "json" else []
        rc, out, err = run_checked(argv, folder, outputs)
        if rc == 0 and target == "json":
            assert _strict_json(out)["verified"] is True


@fuzz(1.5)
@given(data=st.data())
def test_option_values_never_crash(data):
    """check / reproduce / derive with bad option values and bad paths: refused before any work (exit 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "afile").write_text("x")
        (folder / "syntax.py").write_text("def broken(:\n")
        (folder / "raises.py").write_text("raise RuntimeError('at import')\n")
        (folder / "noclaims.py").write_text("X = 1\n")
        bad_path = data.draw(st.sampled_from(["afile/sub", "/proc/attsvm-fuzz/x", "afile/deeper/x"]))
        cmd = data.draw(st.sampled_from(["check", "reproduce", "derive"]))
        if cmd == "check":
            argv = ["check", "--no-db"]
            bad = data.draw(
                st.sampled_from(
                    ["examples", "seconds", "budget", "only", "k", "json", "markdown", "latex", "out", "file", "device"]
                )
            )
            argv += {
                "examples": ["--examples", data.draw(st.sampled_from(["0", "-3", "x"]))],
                "seconds": ["--seconds", data.draw(st.sampled_from(["0", "-1", "nan", "x"]))],
                "budget": ["--budget", data.draw(st.sampled_from(["bogus", "-1", "0", "nan"]))],
                "only": ["--only", "no-such-claim"],
                "k": ["-k", data.draw(st.sampled_from(["(", "and", "not", "a or (b"]))],
                "json": ["--json", bad_path],
                "markdown": ["--markdown", bad_path],
                "latex": ["--latex", bad_path],
                "out": ["--out", bad_path.rsplit("/", 1)[0] if bad_path.startswith("afile") else bad_path],
                "file": [data.draw(st.sampled_from(["syntax.py", "raises.py", "noclaims.py", "missing.py", "afile"]))],
                "device": ["--device", "tpu"],
            }[bad]
        elif cmd == "reproduce":
            argv = ["reproduce", data.draw(st.sampled_from(["visual", "nosuch"])), "--smoke", "--quiet"]
            bad = data.draw(st.sampled_from(["name", "seeds", "workers", "out", "device", "numerics", "format", "dpi"]))
            if bad == "name":
                argv[1] = "nosuch"
            argv += {
                "name": [],
                "seeds": ["--seeds", data.draw(st.sampled_from(["0", "-1", "x"]))],
                "workers": ["--workers", data.draw(st.sampled_from(["0", "-2", "x"]))],
                "out": ["--out", bad_path],
                "device": ["--device", data.draw(st.sampled_from(["tpu", "cuda:x", ""]))],
                "numerics": ["--numerics", data.draw(st.sampled_from(["missing-dir", "afile"]))],
                "format": ["--format", data.draw(st.sampled_from(["jpg", "", ",", "png,tiff", "eps"]))],
                "dpi": ["--dpi", data.draw(st.sampled_from(["0", "-1", "49", "1201", "x", "2.5", "1e3"]))],
            }[bad]
        else:
            argv = ["derive"]
            bad = data.draw(st.sampled_from(["name", "path", "latex", "markdown", "golden"]))
            argv += {
                "name": ["no-such-derivation"],
                "path": ["--path", data.draw(st.sampled_from(["missing-dir", "syntax.py", "raises.py"]))],
                "latex": ["softmax-jacobian", "--latex", bad_path],
                "markdown": ["softmax-jacobian", "--markdown", bad_path],
                "golden": ["softmax-jacobian", "--update-golden", "--golden-dir", "afile"],
            }[bad]
        rc, out, err = run_checked(argv, folder)
        assert rc == 2, (argv, rc, err)


# --------------------------------------------------------------------------------------------- tampered replay
@pytest.fixture(scope="module")
def saved_counterexample(tmp_path_factory):
    """One real counterexample of a small refuted conjecture (the files ``check --replay`` reads)."""
    folder = tmp_path_factory.mktemp("cx")
    claim = Path(__file__).parent.parent / "examples" / "conjectures" / "refuted_conjecture.py"
    rc, out, err = run_cli(
        [
            "check",
            str(claim),
            "--budget",
            "ci",
            "--no-db",
            "--out",
            str(folder / "cx"),
            "--json",
            str(folder / "r.json"),
        ],
        folder,
        record=False,
    )
    assert rc == 0, err
    js = sorted((folder / "cx").glob("*.json"))
    assert js, "the conjecture was not refuted"
    return claim, js[0], js[0].with_suffix(".npz")


def _tamper(obj, draw):
    """One edit to a parsed counterexample JSON: a key removed, a value of another type, or garbage."""
    keys = sorted(obj)
    key = draw(st.sampled_from(keys))
    how = draw(st.sampled_from(["drop", "null", "string", "number", "list", "nested_garbage"]))
    obj = dict(obj)
    if how == "drop":
        obj.pop(key)
    elif how == "null":
        obj[key] = None
    elif how == "string":
        obj[key] = "garbage"
    elif how == "number":
        obj[key] = draw(st.sampled_from([-1, 0, 1e308, 3.5]))
    elif how == "list":
        obj[key] = [1, "a", None]
    else:
        obj[key] = {"__ndarray__": "garbage", "dtype": "complex128"}
    return obj, f"{how}:{key}"


@fuzz(1.0)
@given(data=st.data())
def test_tampered_counterexample_is_refused(data, saved_counterexample):
    claim, js, npz = saved_counterexample
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        obj = json.loads(js.read_text())
        how = data.draw(st.sampled_from(["json_edit", "json_bytes", "npz_bytes", "npz_missing", "json_missing"]))
        (folder / npz.name).write_bytes(npz.read_bytes())
        if how == "json_edit":
            obj, what = _tamper(obj, data.draw)
            assume(what not in ("drop:commands", "drop:reason", "drop:title"))  # advisory keys may be absent
            (folder / js.name).write_text(json.dumps(obj))
        elif how == "json_bytes":
            raw = js.read_bytes().rstrip()  # cutting only trailing whitespace would leave valid JSON
            (folder / js.name).write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
        elif how == "npz_bytes":
            (folder / js.name).write_text(json.dumps(obj))
            raw = npz.read_bytes()
            (folder / npz.name).write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
        elif how == "npz_missing":
            (folder / js.name).write_text(json.dumps(obj))
            os.remove(folder / npz.name)
        rc, out, err = run_checked(["check", str(claim), "--replay", npz.name, "--no-db"], folder)
        if how in ("json_bytes", "npz_bytes", "npz_missing", "json_missing"):
            assert rc == 2, (how, rc, err)
