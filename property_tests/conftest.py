"""Test configuration: Hypothesis profiles, torch seeds, markers.

Profiles: ``ci`` (derandomised, small budgets; chosen when ``CI=true``), ``thorough`` (local default),
``dev`` (quick local iteration). ``HYPOTHESIS_PROFILE`` overrides the choice.
"""

from __future__ import annotations

import os
import signal

# pytest -n 2 on 2 cores: one BLAS/OpenMP thread per worker (oversubscription made one Cholesky 10-100x slower).
# Set before numpy is imported by any test module.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# A shell starts a background job (``pytest … &``) with SIGINT ignored, and an ignored signal stays ignored across
# exec: the Ctrl-C tests' subprocesses would then never see their SIGINT. The tests are about attsvm's handling of
# Ctrl-C, so they run with Python's own handler (a handled signal is reset to the default in a child at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=15,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "thorough"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


@pytest.fixture(autouse=True)
def _torch_seed():
    """Explicit, per-test torch seed (only if torch is already imported by the test)."""
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)
    yield


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite the golden LaTeX files in proofs/tex instead of comparing (review the diff!)",
    )


def pytest_configure(config):
    if config.getoption("--update-golden", default=False):
        os.environ["ATTSVM_UPDATE_GOLDEN"] = "1"


def pytest_collection_modifyitems(config, items):
    """CUDA tests skip visibly when no GPU is present."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # pragma: no cover
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs a CUDA device (none present): GPU check not run")
        for it in items:
            if "cuda" in it.keywords:
                it.add_marker(skip)
