r"""The one tolerance table of attsvm, keyed by dtype and device.

Every numerical comparison in the engine and the tests takes its tolerance from here::

    from attsvm.tolerances import tol
    tol("grad_rtol")                      # float64, cpu
    tol("grad_rtol", dtype="float32", device="cuda")

Keys
----
``grad_rtol`` / ``grad_atol``   closed-form gradient vs autograd (same precision)
``fd_rtol``                     closed form vs central finite differences
``fd_atol``                     central differences: absolute part (times the size of one gradient term)
``kkt``                         KKT residuals of a convex program solution (relative)
``svm_ref_rtol``                fast solver objective vs the cvxpy reference objective
``active``                      margin within this of 1 counts as active (support token)
``rank``                        singular values below ``rank * sigma_max`` count as zero
``corr``                        correlations compared against 1
``batch_rtol``                  batched runs vs the same runs one at a time
``device_rtol``                 CUDA vs CPU results
``nuc_gap``                     relative duality gap accepted for Att-SVM* (nuclear)
``norm_gap``                    relative gap of a proved bracket accepted for the l1 / l_inf / spectral Att-SVMs
``experiment_corr``             experiments: a finite GD run "reached" an SVM direction when 1 - corr <= this
``rowspace``                    GD: ||(W_k - W_0)(I - P_Z)||_F relative to ||W_k - W_0||_F
``rounding``                    relative rounding allowance of a float64 identity/bound evaluated in a few operations
``replay_rtol``                 a float64 GD stretch vs its 50-digit mpmath replay; reference stepper vs engine
``near_tie``                    a score gap $\gamma_{i,\mathrm{opt}}-\max_{t\ne\mathrm{opt}}\gamma_{it}$ at most this
                                times $\|v\|\max_t\|x_{it}\|$ is a near-tie (warned: rounding decides opt)
``trap_slope_rtol``             measured d log s / d||W|| of a trapped input vs the slope its SVM deficit predicts
``spec_rank``                   nsd spec: singular values <= this * sigma_1 are left out of U V^T (about sqrt(eps))

A claim reads them as ``k.tol(name)`` (:meth:`attsvm.kit.Kit.tol`); docs/writing-claims.md lists every key with its
values (a test keeps the list complete).
"""

from __future__ import annotations

_TABLE: dict[tuple[str, str], dict[str, float]] = {
    ("float64", "cpu"): {
        "grad_rtol": 1e-10,
        "grad_atol": 1e-13,
        "fd_rtol": 1e-5,
        "fd_atol": 1e-7,
        "kkt": 1e-7,
        "svm_ref_rtol": 1e-5,
        "active": 1e-6,
        "rank": 1e-7,
        "corr": 1e-9,
        "batch_rtol": 1e-10,
        "device_rtol": 1e-8,
        "nuc_gap": 1e-6,
        "norm_gap": 1e-6,
        "experiment_corr": 1e-2,
        "rounding": 1e-12,
        "rowspace": 1e-10,
        "replay_rtol": 1e-10,
        "trap_slope_rtol": 2e-2,
        "near_tie": 1e-12,
        "spec_rank": 1e-8,
    },
    ("float32", "cpu"): {
        "grad_rtol": 1e-4,
        "grad_atol": 1e-6,
        "fd_rtol": 1e-2,
        "fd_atol": 1e-3,
        "kkt": 1e-4,
        "svm_ref_rtol": 1e-3,
        "active": 1e-4,
        "rank": 1e-5,
        "corr": 1e-5,
        "batch_rtol": 1e-4,
        "device_rtol": 1e-3,
        "nuc_gap": 1e-4,
        "norm_gap": 1e-4,
        "experiment_corr": 1e-2,
        "rounding": 1e-5,
        "rowspace": 1e-4,
        "replay_rtol": 1e-4,
        "trap_slope_rtol": 2e-2,
        "near_tie": 1e-5,
        "spec_rank": 3e-4,
    },
}
# CUDA: same numbers except reductions may be reordered, so device comparisons are looser.
_TABLE[("float64", "cuda")] = dict(_TABLE[("float64", "cpu")], batch_rtol=1e-9, device_rtol=1e-8)
_TABLE[("float32", "cuda")] = dict(_TABLE[("float32", "cpu")])


def tol(name: str, dtype: str = "float64", device: str = "cpu") -> float:
    """Return the tolerance ``name`` for ``dtype`` on ``device`` (``cuda:1`` counts as ``cuda``)."""
    dtype = str(dtype).replace("torch.", "")
    device = str(device).split(":")[0]
    try:
        return _TABLE[(dtype, device)][name]
    except KeyError as exc:
        raise KeyError(f"no tolerance {name!r} for dtype={dtype} device={device}") from exc


def table() -> dict[tuple[str, str], dict[str, float]]:
    """A copy of the whole table (for reports)."""
    return {k: dict(v) for k, v in _TABLE.items()}
