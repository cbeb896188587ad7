r"""Patch tokens of images: each image becomes the sequence of its rectangular pixel blocks with a position code.

An image $I\in\mathbb R^{H\times W}$ cut into blocks of $p_h\times p_w$ pixels (which must tile it) has
$T=(H/p_h)(W/p_w)$ patches, taken in row-major order of the patch grid. Token $t$ is

$$x_t=(\mathrm{vec}(\text{patch }t);\,e_t)\in\mathbb R^{p_hp_w+T},$$

its pixels in row-major order followed by the one-hot position code $e_t$ (``code="onehot"``), or
$x_t=(\mathrm{vec}(\text{patch }t);\,r_t/(G_h-1),\,c_t/(G_w-1))\in\mathbb R^{p_hp_w+2}$ with the patch's row and
column $(r_t,c_t)$ in the $G_h\times G_w$ patch grid (``code="grid"``, 2 coordinates instead of $T$). Either code
makes every token of an image distinct (two blank patches of one image would otherwise be the same vector: their
scores tie and the Att-SVM constraint between them vanishes). Pixel rows are the patches of $1\times W$ pixels.
"""

from __future__ import annotations

import numpy as np

from .errors import InputError


def patch_tokens(images: np.ndarray, size: tuple[int, int], code: str = "onehot") -> np.ndarray:
    r"""Tokens $x_{it}=(\mathrm{vec}(\text{patch }t\text{ of image }i);\,e_t)$, shape (n, T, $p_hp_w$ + T), for
    ``images`` (n, H, W) and patch ``size`` $(p_h, p_w)$ dividing (H, W); with ``code="grid"`` the position code is
    the patch's (row, column) in the grid scaled to $[0,1]$, shape (n, T, $p_hp_w$ + 2)."""
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3:
        raise InputError(f"images must have shape (n, H, W), got {images.shape}")
    n, H, W = images.shape
    ph, pw = (int(s) for s in size)
    if ph < 1 or pw < 1 or H % ph or W % pw:
        raise InputError(f"patches of {ph}x{pw} pixels do not tile {H}x{W} images")
    gh, gw = H // ph, W // pw
    pix = images.reshape(n, gh, ph, gw, pw).transpose(0, 1, 3, 2, 4).reshape(n, gh * gw, ph * pw)
    T = gh * gw
    if code == "onehot":
        pos = np.eye(T)
    elif code == "grid":
        r, c = np.divmod(np.arange(T), gw)
        pos = np.stack([r / max(gh - 1, 1), c / max(gw - 1, 1)], axis=1)
    else:
        raise InputError(f"unknown position code {code!r} (known: onehot, grid)")
    return np.concatenate([pix, np.broadcast_to(pos, (n, T, pos.shape[1]))], axis=-1)


def patch_box(t: int, grid_width: int, size: tuple[int, int]) -> tuple[float, float, float, float]:
    """The pixel rectangle ``(x0, y0, width, height)`` of patch ``t`` (row-major in a patch grid ``grid_width``
    patches wide) in image coordinates, pixel centres at integers as ``imshow`` draws them."""
    ph, pw = (int(s) for s in size)
    r, c = divmod(int(t), int(grid_width))
    return pw * c - 0.5, ph * r - 0.5, float(pw), float(ph)


def patch_grid(values: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """Per-patch ``values`` (..., T) laid out on the patch grid (..., rows, columns), row-major."""
    values = np.asarray(values)
    return values.reshape(*values.shape[:-1], int(grid[0]), int(grid[1]))
