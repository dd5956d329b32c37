"""Figures of the netmodel part: measured and modelled aggregate bandwidth against message
size, one curve per k (the form of Gropp16's Fig. 1), and relative-error maps over (k, n)
per fit variant (the form of Fig. 2)."""

from __future__ import annotations

import numpy as np

from shoal.files import save_figure
from shoal.netmodel.data import Measurements
from shoal.netmodel.fit import relative_errors
from shoal.netmodel.regimes import LABELS, Regime


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bandwidth(m: Measurements, regimes: list[Regime], variant: str, path: str) -> None:
    """Measured points and the ``variant`` fit of each regime, bandwidth vs size per k."""
    plt = _pyplot()
    m = m.reduce("best")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ks = np.unique(m.k)
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(ks)))
    for k, color in zip(ks, colors, strict=True):
        sel = m.k == k
        ax.loglog(m.n[sel], m.k[sel] * m.n[sel] / m.t[sel], "o", ms=3, color=color,
                  label=f"k={int(k)}" if len(ks) <= 8 or k in (ks[0], ks[-1]) else None)
        for reg in regimes:
            f = reg.fits.get(variant)
            part = sel & (m.n > reg.low) & (m.n <= reg.high)
            if f is None or not part.any():
                continue
            n = np.geomspace(m.n[part].min(), m.n[part].max(), 50)
            ax.loglog(n, f.model.bandwidth(n, k), "-", color=color, lw=1)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("aggregate bandwidth k·n/T (bytes/s)")
    ax.set_title(f"measured (points) and {LABELS[variant]} (lines)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


def errors(m: Measurements, regimes: list[Regime], path: str) -> None:
    """Relative error |T_model - T| / T over (n, k), one panel per variant."""
    plt = _pyplot()
    m = m.reduce("best")
    ks, ns = np.unique(m.k), np.unique(m.n)
    variants = [v for v in LABELS if any(v in r.fits for r in regimes)]
    fig, axes = plt.subplots(1, len(variants), figsize=(3.2 * len(variants), 3.2),
                             squeeze=False)
    for ax, variant in zip(axes[0], variants, strict=True):
        grid = np.full((len(ks), len(ns)), np.nan)
        for reg in regimes:
            f = reg.fits.get(variant)
            part = (m.n > reg.low) & (m.n <= reg.high)
            if f is None:
                continue
            err = relative_errors(f.model, m.n[part], m.k[part], m.t[part])
            grid[np.searchsorted(ks, m.k[part]), np.searchsorted(ns, m.n[part])] = err
        im = ax.imshow(grid, aspect="auto", origin="lower", cmap="magma")
        ax.set_title(LABELS[variant], fontsize=8)
        ax.set_xlabel("size index")
        ax.set_ylabel("k index")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    save_figure(fig, path)
