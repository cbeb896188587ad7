r"""``ntp-graph-svm-direction``, ``ntp-finite-part``, ``ntp-scc-retrieval`` (paper: Li, Huang, Ildiz, Rawat, Oymak,
*Mechanics of next token prediction with self-attention*, arXiv 2403.08081; THEORY §7).

GD on the next-token log-loss of self-attention learns $W_k\approx W^{fin}+R_kW^{svm}$
(:mod:`attsvm.ntp.decomposition`): the direction goes to the graph SVM (*hard retrieval*: the attention mass
outside the highest-priority SCC present goes to 0) while the projection on the equality span $S$ goes to the
finite part (*soft composition* inside that SCC). Measured per run of a batch on the authors' data law
($n=6$, $T=4$, $K=6$, $d=8$, Gaussian unit embeddings, labels drawn from the sequence) from PyTorch's
``nn.Linear`` initialisation, every recorded iterate against the certified graph SVM (exact rational KKT) and the
proved $W^{fin}$. A run passes when its measure ends $\le$ ``eps`` and does not increase by more than ``rise``
between consecutive records of the second half (finite-horizon evidence of "$\to$"):

* ``ntp-graph-svm-direction``: $1-\mathrm{corr}(W_k,W^{svm})$ under normalised GD, $\eta=0.1$ (the authors'
  step; $\epsilon=0$ in $g/(\|g\|+\epsilon)$, so no step vanishes), 4000 steps;
* ``ntp-finite-part``: $\|P_SW_k-W^{fin}\|_F$ under plain GD with $\eta=1/L$ ($L$ the proved smoothness bound
  of :func:`attsvm.ntp.loss.smoothness_constant`), 20000 steps, on data with a cycle in some priority graph (so
  $S\ne\{0\}$). Under *normalised* GD with a constant step the projection does not converge: it chatters at
  $\approx\eta/2$ around $W^{fin}$ (measured: 0.0496–0.0507 at $\eta=0.1$), which is why the claim is stated for
  GD (the theorem's algorithm);
* ``ntp-scc-retrieval``: $\max_i\log\sum_{t\notin\mathcal C_i}s_{it}$ (natural log) under the normalised GD of
  the first claim, ``eps`` $=\log10^{-2}$.

Confirmation of a failing run: replayed at 50 digits (:func:`attsvm.ntp.decomposition.replayed`; a second replay
at 70 digits must agree to ``tol("replay_rtol")``), its recorded iterates measured again; the failure must persist
by more than the proved radius of $W^{fin}$ (finite part) or ``tol("rounding")``. The *float64* run need not agree
with the replay: normalised GD on these data amplifies rounding (float64 and 50 digits part by about $10^{-2}$
relative within 4000 steps, as the chatter inside $S$ follows the sign of tiny gradient components), so the
high-precision run, not the float64 one, is what a refutation stands on.
"""

from __future__ import annotations

from attsvm.claims import Outcome, claim

SWEEP = {
    "origin": "paper",
    "source": "arXiv 2403.08081; THEORY §7",
    "kind": "empirical",
    "rate": 0.8,
    "examples": 24,
    "ci_examples": 24,
    "depends": ("ntp-logloss-convex",),
}
DATA = {"data": "ntp", "n": 6, "T": 4, "K": 6, "d": 8}
#: the three claims: measure, GD settings, threshold, allowed rise, extra hypotheses
SPEC = {
    "ntp-graph-svm-direction": ("one_minus_corr", {"algo": "ngd", "lr": 0.1, "steps": 4000}, 0.05, 1e-4, {}),
    "ntp-finite-part": ("finite_distance", {"algo": "gd", "lr": "1/L", "steps": 20000}, 0.01, 0.0, {"graph": "cyclic"}),
    "ntp-scc-retrieval": ("log_outside_mass", {"algo": "ngd", "lr": 0.1, "steps": 4000}, -4.605170185988091, 0.0, {}),
}


def _make(cid: str, title: str):
    measure, settings, eps, rise, extra = SPEC[cid]

    @claim(
        id=cid,
        title=title,
        hypotheses={**DATA, **extra},
        params={**settings, "eps": eps, "rise": rise},
        **SWEEP,
    )
    def conclusion(case):
        from attsvm.ntp.decomposition import sweep_outcome

        return Outcome(**sweep_outcome(case.batch, case.seed, case.hypotheses, measure))

    @conclusion.confirm
    def _confirm(case, outcome):
        from attsvm.ntp.decomposition import confirm_outcome

        b = case.batch.batch_size
        return Outcome(**confirm_outcome(case.data, b, case.index, case.seed, case.hypotheses, measure))

    return conclusion


ntp_graph_svm_direction = _make(
    "ntp-graph-svm-direction", "Normalised GD on the next-token loss converges in direction to the graph SVM"
)
ntp_finite_part = _make(
    "ntp-finite-part", "GD's projection on the equality span of the graph SVM converges to the finite part W^fin"
)
ntp_scc_retrieval = _make(
    "ntp-scc-retrieval", "The attention mass outside the highest-priority SCC present in the sequence goes to 0"
)
