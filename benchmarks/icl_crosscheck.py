r"""Cross-check of :mod:`attsvm.icl` against the authors' code of Frei & Vardi (arXiv 2410.01774).

Their repository (``spencerfrei/icl_classification``) is *not* a dependency and none of its code is copied here: the
script imports their ``classification_icl.py`` from a checkout given on the command line, runs their ``Trainer`` on
their own data and settings (their generator, ``R_train = 5 sqrt(d)``, ``N = 40``, ``B = d`` tasks, SGD with step
0.01 for 300 full-batch steps from ``W = 0``, on the CPU, float32 as they run it), then converts *the same tasks*
to :class:`attsvm.icl.ICLData` (labels 0/1 → ±1, float64) and trains with :func:`attsvm.gd.run` on the exact
next-token encoding. Reported per ``d``: $1-\mathrm{corr}$ of the two trained $W$, the test accuracies of both on
their validation tasks (``R_val = d^0.3``, label flips ``p``) and on a common attsvm test set, the in-context
(memorisation) accuracy of both, and the wall times side by side (their loop evaluates the validation set at every
step, as written; attsvm's run is the 300 steps alone).

Their module imports ``wandb`` and ``pandas`` at the top but uses them only for logging and saving results, which
stay off here; where those packages are missing the script puts empty stand-ins in ``sys.modules`` (and says so).

Get a checkout with ``git clone https://github.com/spencerfrei/icl_classification`` and run::

    python benchmarks/icl_crosscheck.py --checkout PATH/TO/icl_classification [--dims 20 50 100] [--p 0.2]

Without a usable checkout the script exits 2 with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import sys
import time
import types
from pathlib import Path

import numpy as np


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


def load_theirs(checkout: Path):
    src = checkout / "classification_icl.py"
    if not src.is_file():
        fail(f"{checkout}: no classification_icl.py there (give a checkout of spencerfrei/icl_classification)")
    stubbed = []
    for name in ("wandb", "pandas"):
        try:
            importlib.import_module(name)
        except ImportError:
            stand_in = types.ModuleType(name)
            stand_in.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = stand_in
            stubbed.append(name)
    spec = importlib.util.spec_from_file_location("classification_icl", src)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # their module failed to import: name it in one line
        fail(f"{src}: cannot import ({type(exc).__name__}: {exc})")
    return mod, stubbed


def to_icl(cx, cy, tx, ty, R: float, p: float):
    from attsvm.icl import ICLData

    f = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    return ICLData(f(cx), 2 * f(cy) - 1, f(tx), 2 * f(ty) - 1, R, p)


def one(mod, d: int, p: float, seed: int) -> dict:
    import torch

    from attsvm import gd, icl
    from attsvm.model import corr

    torch.manual_seed(seed)
    cfg = mod.ExperimentConfig(
        d=d, N=40, B=d, B_val=50, R_train=5 * d**0.5, R_val=d**0.3, max_steps=300, checkpoint_steps=[],
        label_flip_p=p, learning_rate=1e-2, use_cuda=False, use_wandb=False, save_checkpoints=False,
        save_results=False,
    )  # fmt: skip
    trainer = mod.Trainer(cfg)
    t0 = time.perf_counter()
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    t_theirs = time.perf_counter() - t0
    W_theirs = trainer.model.W.detach().cpu().numpy().astype(np.float64)
    train = to_icl(*trainer.train_dataset[0], cfg.R_train, 0.0)
    val = to_icl(*trainer.val_dataset[0], cfg.R_val, p)
    t0 = time.perf_counter()
    W_ours = gd.run(icl.as_ntp(train), algo="gd", loss="nll", init="zero", lr=1e-2, steps=300).W[0]
    t_ours = time.perf_counter() - t0
    cos = float(corr(W_theirs, W_ours))
    test = icl.generate(d, 2500, 19, d**0.3, p_flip=p, seed=seed + 1)  # their evaluation: context 19, R = d^0.3
    with torch.no_grad():  # their own forward pass and in-context predictions on their validation tasks
        cx, cy, tx, ty = trainer.val_dataset[0]
        acc_theirs_fwd = float(((trainer.model(cx, cy, tx) > 0).float() == ty).float().mean())
        mem_theirs_fwd = float((trainer.model.compute_in_context_preds(cx, cy) == cy).float().mean())
    return {
        "d": d,
        "one_minus_corr": 1 - cos,
        "rel_diff": float(np.linalg.norm(W_theirs - W_ours) / np.linalg.norm(W_ours)),
        "val_acc_theirs_forward": acc_theirs_fwd,
        "val_acc_theirs_W_attsvm_formula": float(icl.accuracy(W_theirs, val)),
        "val_acc_ours": float(icl.accuracy(W_ours, val)),
        "val_mem_theirs_forward": mem_theirs_fwd,
        "val_mem_ours": float(np.mean(icl.in_context_predictions(W_ours, val) == val.labels)),
        "test_acc_theirs": float(icl.accuracy(W_theirs, test)),
        "test_acc_ours": float(icl.accuracy(W_ours, test)),
        "seconds_theirs": t_theirs,
        "seconds_ours": t_ours,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", type=Path, help="a checkout of github.com/spencerfrei/icl_classification")
    ap.add_argument("--dims", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--p", type=float, default=0.2, help="label-flip rate of the validation tasks (default 0.2)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.checkout is None:
        fail("give --checkout PATH (git clone https://github.com/spencerfrei/icl_classification)")
    if not a.checkout.is_dir():
        fail(f"{a.checkout}: no such directory")
    if not 0 <= a.p < 0.5 or any(d < 1 for d in a.dims):
        fail("need 0 <= p < 1/2 and positive dimensions")
    mod, stubbed = load_theirs(a.checkout)
    if stubbed:
        print(f"(stand-ins for the logging-only imports {', '.join(stubbed)} of their module)")
    cols = ("d", "1-corr", "rel diff", "val acc theirs/ours", "in-context theirs/ours", "test acc theirs/ours",
            "time theirs / attsvm")  # fmt: skip
    print(" | ".join(cols))
    for d in a.dims:
        r = one(mod, d, a.p, a.seed)
        print(
            f"{r['d']} | {r['one_minus_corr']:.2e} | {r['rel_diff']:.2e} | "
            f"{r['val_acc_theirs_forward']:.4f} ({r['val_acc_theirs_W_attsvm_formula']:.4f}) / "
            f"{r['val_acc_ours']:.4f} | "
            f"{r['val_mem_theirs_forward']:.4f} / {r['val_mem_ours']:.4f} | "
            f"{r['test_acc_theirs']:.4f} / {r['test_acc_ours']:.4f} | "
            f"{r['seconds_theirs']:.2f} s / {r['seconds_ours']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
