"""Options that several commands share: the pool of workers (``-n N|auto``, ``--cluster SPEC``; docs/scale.md) and
``--set KEY=VALUE`` assignments (``attsvm reproduce``, ``attsvm prove``)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from ..errors import InputError


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


def parse_assignments(items: Iterable[str], option: str = "--set") -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (``--set``, repeatable) as ``{KEY: "VALUE"}``; a malformed item or a key given
    twice is bad input."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = str(item).partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"{option} takes KEY=VALUE, got {item!r}")
        if key in out:
            raise InputError(f"{option}: option {key!r} given twice")
        out[key] = value
    return out
