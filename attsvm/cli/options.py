"""Options that several commands share: the pool of workers (``-n N|auto``, ``--cluster SPEC``; docs/scale.md)."""

from __future__ import annotations

import argparse


def add_pool_options(
    p: argparse.ArgumentParser, workers_help: str, cluster_what: str, cluster_default: str = ""
) -> None:
    """``-n/--workers N|auto`` (help ``workers_help``) and ``--cluster SPEC`` ("run ``cluster_what`` on Dask ...") on
    ``p``; the values are checked by :func:`attsvm.pool.workers_of` / :func:`attsvm.pool.check_cluster` when the
    command runs."""
    p.add_argument("-n", "--workers", dest="workers", default=None, metavar="N|auto", help=workers_help)
    p.add_argument(
        "--cluster",
        default=None,
        metavar="SPEC",
        help=f"run {cluster_what} on Dask: local, local:N (a local cluster of N workers) or tcp://HOST:PORT (a "
        f"running dask scheduler); needs pip install 'attsvm[dask]'; not with -n{cluster_default}",
    )
