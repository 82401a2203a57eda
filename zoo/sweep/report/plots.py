"""Every plot of a sweep report: lines against size or frames, heatmaps (model x size, frames x size per model,
V-NIAH depth x length), per-strategy panels. Distinct colours per encoding family, a marker per series, legends
outside the axes, colour scales that span the observed values; each file written atomically."""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List

import numpy as np
import pandas as pd

from zoo.datasets.files import write_atomic
from .tables import SEED_SUFFIX, relative_to_train

__all__ = ['encoding_family', 'series_styles', 'color_range', 'plot_scaling', 'plot_heatmap', 'plot_strategies',
           'plot_frames_scaling', 'plot_grid_heatmap', 'plot_accuracy', 'chance_by_panel', 'plot_vniah', 'NIAH_TASK']

#: The task name of V-NIAH items (needle in a video haystack) in video-QA rows and predictions.
NIAH_TASK = 'vniah'


def _pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str, **kwargs: Any) -> None:
    """Write ``fig`` to ``path`` as PNG (atomically) and close it."""
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png', **kwargs))
    _pyplot().close(fig)


_PALETTE = ('#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
            '#000000', '#7f7f7f', '#393b79', '#637939', '#7b4173')


_MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '<', '>', 'h', 'p', '*', 'd', '8', 'H')


_LINESTYLES = ('-', '--', ':', '-.', (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2, 2, 2)))




def encoding_family(row: Any) -> str:
    """The colour group of a series: the leading letters of its encoding name (``rope_axial``, ``rope_mixed``,
    ``rope_mixed_ape`` -> ``rope``; ``comrope_ap/ld`` -> ``comrope``; ``irpe_k/qkv`` -> ``irpe``; ``peg0to5`` ->
    ``peg``), from the ``pe`` column, else from the label without its seed suffix."""
    pe = row.get('pe') if hasattr(row, 'get') else None
    if not (isinstance(pe, str) and pe):
        pe = SEED_SUFFIX.sub('', str(row['label'])).split(' · ')[0].strip().split(' ')[-1]
    m = re.match(r'[A-Za-z]+', pe)
    return m.group(0).lower() if m else pe


def series_styles(df: pd.DataFrame) -> Dict[str, Dict[str, Any]]:
    """``{label: {color, marker, ls}}``: one colour per encoding family (:func:`encoding_family`), one line style per
    variant or seed inside the family, and a marker of its own for every series (series never look alike)."""
    firsts = df.drop_duplicates('label')
    groups: Dict[str, List[str]] = {}
    for _, row in firsts.iterrows():
        groups.setdefault(encoding_family(row), []).append(row['label'])
    styles = {}
    n = 0
    for g, (group, labels) in enumerate(groups.items()):
        for v, label in enumerate(labels):
            styles[label] = dict(color=_PALETTE[g % len(_PALETTE)], marker=_MARKERS[n % len(_MARKERS)],
                                 ls=_LINESTYLES[v % len(_LINESTYLES)])
            n += 1
    return styles


def color_range(values) -> tuple:
    """Colour limits spanning the finite values (whole points), so that small differences stay visible; one value
    alone gets 5 points either side, kept inside 0-100 when the values are percentages (never -1..1 for a 0 %)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return 0., 100.
    lo, hi = float(np.floor(v.min())), float(np.ceil(v.max()))
    if hi > lo:
        return lo, hi
    if 0 <= lo and hi <= 100:
        return max(0., lo - 5.), min(100., hi + 5.)
    return lo - 5., hi + 5.


def plot_scaling(df: pd.DataFrame, path: str, title: str) -> None:
    """Two panels against input size: top-1 (%), and top-1 relative to each model's own training-size top-1
    (points). Colour per encoding, line style per variant / seed, a marker per series; each model's training size is
    a star (and a dotted line); the legend sits right of the axes."""
    plt = _pyplot()

    df = df.assign(rel=relative_to_train(df))
    styles = series_styles(df)
    n_series = len(styles)
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.8 + 0.09 * max(0, n_series - 14)), dpi=130)
    for ax, col in zip(axes, ('top1', 'rel')):
        for label, part in df.groupby('label', sort=False):
            part = part.sort_values('size')
            st = styles[label]
            ax.plot(part['size'], part[col], color=st['color'], ls=st['ls'], marker=st['marker'], ms=5, lw=1.4,
                    mfc='white' if st['ls'] != '-' else st['color'], mec=st['color'], label=label)
            trained = part[part['size'] == part['train_size']]
            if len(trained):
                ax.plot(trained['size'], trained[col], marker='*', ms=13, color=st['color'], mec='black', mew=0.6,
                        ls='none', zorder=5)
        for size in sorted(set(df['train_size'])):
            ax.axvline(size, color='grey', ls=':', lw=1)
            ax.annotate(f'train {size} px', (size, 0.01), xycoords=('data', 'axes fraction'), fontsize=8,
                        color='grey', ha='left', xytext=(3, 0), textcoords='offset points')
        ax.set_xlabel('evaluation input size (px)')
        ax.set_xticks(sorted(set(df['size'])))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel('top-1 accuracy (%)')
    axes[0].set_title('top-1', fontsize=10)
    axes[1].axhline(0, color='black', lw=0.8)
    axes[1].set_ylabel('top-1 minus top-1 at the training size (points)')
    axes[1].set_title('relative to each model\'s training-size top-1', fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc='upper left', bbox_to_anchor=(0.81, 0.93), borderaxespad=0.,
               ncol=1 if n_series <= 24 else 2, title='model (★ = training size)', title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.8, 0.97))
    _save(fig, path, bbox_inches='tight')


def plot_heatmap(df: pd.DataFrame, path: str, title: str, metric: str = 'top1') -> None:
    """Model (rows) x size (columns) heatmap of ``metric``, values in the cells, each model's training size boxed."""
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    labels = list(dict.fromkeys(df['label']))
    wide = df.pivot_table(index='label', columns='size', values=metric, sort=False, dropna=False).reindex(labels)
    train = df.groupby('label', sort=False)['train_size'].first()
    sizes = list(wide.columns)
    fig, ax = plt.subplots(figsize=(1.0 * len(sizes) + 4.0, 0.36 * len(labels) + 1.6), dpi=130)
    vals = wide.values.astype(float)
    im = ax.imshow(vals, cmap='viridis', aspect='auto')
    lo, hi = pd.Series(vals.ravel()).min(), pd.Series(vals.ravel()).max()
    for i, label in enumerate(labels):
        for j, size in enumerate(sizes):
            v = vals[i, j]
            if pd.isna(v):
                ax.text(j, i, 'n/a', ha='center', va='center', fontsize=7, color='grey')
                continue
            dark = hi > lo and (v - lo) / (hi - lo) < 0.55
            ax.text(j, i, f'{v:.1f}', ha='center', va='center', fontsize=7.5, color='white' if dark else 'black')
            if size == train[label]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec='red', lw=1.6))
    ax.set_xticks(range(len(sizes)), [f'{s} px' for s in sizes])
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel('evaluation input size (red box: training size)')
    fig.colorbar(im, ax=ax, label=f'{metric} (%)', fraction=0.04, pad=0.02)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)


_STRATEGY_STYLE = {'none': ('#000000', 'o'), 'pi': ('#1f77b4', 's'), 'ntk': ('#2ca02c', '^'), 'yarn': ('#d62728', 'D'),
                   'mspoe': ('#9467bd', 'v'), 'longrope': ('#ff7f0e', 'P')}


def plot_strategies(df: pd.DataFrame, path: str, title: str) -> None:
    """One panel pair per encoding: top-1 against size (colour and marker per strategy, line style per seed or
    variant), and top-1 minus the ``none`` strategy of the same model (points); the training size starred."""
    plt = _pyplot()

    d = df[df['extrapolation'].fillna('').astype(str) != ''].copy()
    none = d[d['extrapolation'] == 'none'].set_index(['base_label', 'size'])['top1']
    d['delta'] = [r['top1'] - none.get((r['base_label'], r['size']), float('nan')) for _, r in d.iterrows()]
    encs = list(dict.fromkeys(d['pe'] if 'pe' in d and d['pe'].astype(bool).all() else d['base_label']))
    fig, axes = plt.subplots(2, len(encs), figsize=(3.6 * len(encs) + 1.0, 7.2), dpi=130, squeeze=False,
                             sharex=True)
    handles, styles = {}, {}
    for c, enc in enumerate(encs):
        part = d[(d['pe'] if 'pe' in d and d['pe'].astype(bool).all() else d['base_label']) == enc]
        variants = list(dict.fromkeys(part['base_label']))
        for (base, strategy), p in part.groupby(['base_label', 'extrapolation'], sort=False):
            p = p.sort_values('size')
            # longrope=FILE labels draw as longrope; other strategies grey
            color, marker = _STRATEGY_STYLE.get(str(strategy).split('=', 1)[0], ('#7f7f7f', 'x'))
            ls = _LINESTYLES[variants.index(base) % len(_LINESTYLES)]
            for r, col in enumerate(('top1', 'delta')):
                ax = axes[r, c]
                h, = ax.plot(p['size'], p[col], color=color, marker=marker, ls=ls, ms=5, lw=1.4,
                             mfc=color if variants.index(base) == 0 else 'white', mec=color)
                t = p[p['size'] == p['train_size']]
                ax.plot(t['size'], t[col], marker='*', ms=12, color=color, mec='black', mew=0.5, ls='none')
            handles.setdefault(f'{strategy}', plt.Line2D([], [], color=color, marker=marker, ms=5))
            styles.setdefault(base.replace(enc, '').strip() or base,
                              plt.Line2D([], [], color='grey', ls=ls, marker='o', mfc='grey' if ls == '-' else 'white'))
        axes[0, c].set_title(enc, fontsize=10)
        axes[1, c].axhline(0, color='black', lw=0.8)
        for r in range(2):
            axes[r, c].grid(alpha=0.3)
            axes[r, c].set_xticks(sorted(set(d['size'])))
        axes[1, c].set_xlabel('evaluation input size (px)')
    axes[0, 0].set_ylabel('top-1 accuracy (%)')
    axes[1, 0].set_ylabel('top-1 minus strategy none (points)')
    if len(styles) > 1:  # line styles: seeds / variants of one encoding
        handles.update({f'line: {k}': v for k, v in styles.items()})
    axes[0, -1].legend(list(handles.values()), list(handles), fontsize=8, loc='upper left', bbox_to_anchor=(1.03, 1.0),
                       title='strategy (★ = training size)', title_fontsize=8, borderaxespad=0.)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    _save(fig, path, bbox_inches='tight')


def plot_frames_scaling(df: pd.DataFrame, path: str, title: str) -> None:
    """Two panels: top-1 against frames at each model's training size, and against size at its training frames."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    colors = plt.get_cmap('tab20').colors
    for i, (label, part) in enumerate(df.groupby('label', sort=False)):
        c = colors[i % len(colors)]
        for ax, x, fixed, train_x in ((axes[0], 'frames', 'size', 'train_frames'),
                                      (axes[1], 'size', 'frames', 'train_size')):
            p = part[part[fixed] == part['train_' + fixed]].sort_values(x)
            if not len(p):
                continue
            ax.plot(p[x], p['top1'], marker='o', ms=4, color=c, label=label)
            t = p[p[x] == p[train_x]]
            ax.plot(t[x], t['top1'], marker='*', ms=13, color=c, mec='black', mew=0.6, ls='none')
    for ax, x, unit in ((axes[0], 'frames', 'frames (at the training size)'),
                        (axes[1], 'size', 'frame size, px (at the training frame count)')):
        ax.set_xscale('log', base=2)
        ticks = sorted(set(df[x]))
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel(unit)
        ax.set_ylabel('top-1 accuracy (%)')
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        axes[1].legend(list(handles.values()), list(handles), fontsize=8, loc='upper left',
                       bbox_to_anchor=(1.02, 1.0), borderaxespad=0.)
    fig.suptitle(title + '  (★ = training clip)', fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def plot_grid_heatmap(part: pd.DataFrame, path: str, title: str) -> None:
    """Top-1 over frames (rows) x size (columns) for one model, values written in the cells."""
    plt = _pyplot()
    wide = part.pivot_table(index='frames', columns='size', values='top1', dropna=False).sort_index()
    fig, ax = plt.subplots(figsize=(1.1 * len(wide.columns) + 2.2, 0.7 * len(wide.index) + 1.6), dpi=120)
    lo, hi = color_range(wide.values)
    im = ax.imshow(wide.values, cmap='viridis', vmin=lo, vmax=hi, aspect='auto')
    ax.set_xticks(range(len(wide.columns)), [str(c) for c in wide.columns])
    ax.set_yticks(range(len(wide.index)), [str(r) for r in wide.index])
    ax.set_xlabel('frame size (px)')
    ax.set_ylabel('frames')
    tf, ts = int(part['train_frames'].iloc[0]), int(part['train_size'].iloc[0])
    for i, t in enumerate(wide.index):
        for j, s in enumerate(wide.columns):
            v = wide.values[i, j]
            text = 'fail' if pd.isna(v) else f'{v:.0f}'
            ax.text(j, i, text + ('*' if (t, s) == (tf, ts) else ''), ha='center', va='center', fontsize=8,
                    color='white' if pd.isna(v) or v < (lo + hi) / 2 else 'black')
    fig.colorbar(im, ax=ax, label='top-1 (%)')
    ax.set_title(f'{title}\n(* = training clip: {tf} frames x {ts} px)', fontsize=9)
    fig.tight_layout()
    _save(fig, path)


def plot_accuracy(df: pd.DataFrame, path: str, title: str) -> None:
    """Accuracy against frames per model (at its training size): QA tasks, and V-NIAH when present; chance dashed."""
    plt = _pyplot()
    panels = [('acc_qa', 'QA tasks (V-NIAH excluded)')] if df.get('acc_qa') is not None else [('acc', 'all items')]
    if 'acc_vniah' in df and df['acc_vniah'].notna().any():
        panels.append(('acc_vniah', 'V-NIAH'))
    if 'acc_qa' in df and not df['acc_qa'].notna().any():
        panels = panels[1:] or [('acc', 'all items')]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, 4.2), dpi=120, squeeze=False)
    axes = axes[0]
    part = df[df['size'] == df['train_size']]
    styles = series_styles(part[['label']].assign(pe=None)) if len(part) else {}
    for ax, (col, name) in zip(axes, panels):
        for label, p in part.groupby('label', sort=False):
            p = p.sort_values('frames')
            st = styles.get(label, {})
            ax.plot(p['frames'], p[col], label=label, ms=5, **st)
            tf = p[p['frames'] == p['train_frames']]
            ax.plot(tf['frames'], tf[col], marker='*', ms=13, color=st.get('color'), mec='black', mew=0.6, ls='none')
        ax.set_xscale('log', base=2)
        ticks = sorted(set(df['frames']))
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel('frames per clip')
        ax.set_ylabel('accuracy (%)')
        top = part[col].max() if len(part) and part[col].notna().any() else 0
        ax.set_ylim(0, min(100, max(60, top + 10)))  # from 0: near-chance noise must not look like a trend
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    chance = chance_by_panel(df)
    for ax, (col, _) in zip(axes, panels):
        if col in chance and not pd.isna(chance[col]):
            ax.axhline(chance[col], color='grey', ls='--', lw=1, label='chance')
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    axes[-1].legend(list(handles.values()), list(handles), fontsize=8, loc='upper left', bbox_to_anchor=(1.02, 1.0),
                    borderaxespad=0.)
    fig.suptitle(title + '  (★ = training frames)', fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def chance_by_panel(df: pd.DataFrame) -> Dict[str, float]:
    out = {}
    for col in ('acc_qa', 'acc_vniah', 'acc'):
        key = 'chance_' + col.split('_')[-1] if col != 'acc' else 'chance'
        if key in df:
            out[col] = df[key].dropna().mean() if df[key].notna().any() else math.nan
    return out


def plot_vniah(preds: pd.DataFrame, path: str, title: str) -> None:
    """V-NIAH accuracy over needle depth (columns) x haystack length (rows): one panel per model (rows) and frame
    count (columns), the value written in each cell."""
    plt = _pyplot()
    labels = list(dict.fromkeys(preds['label']))
    frames = sorted(set(preds['frames']))
    fig, axes = plt.subplots(len(labels), len(frames), figsize=(2.6 * len(frames) + 1.2, 1.9 * len(labels) + 0.8),
                             dpi=110, squeeze=False, layout='constrained')
    im = None
    for i, label in enumerate(labels):
        for j, t in enumerate(frames):
            ax = axes[i][j]
            p = preds[(preds['label'] == label) & (preds['frames'] == t)]
            wide = p.pivot_table(index='length', columns='depth', values='correct', aggfunc='mean') * 100
            im = ax.imshow(wide.values, cmap='viridis', vmin=0, vmax=100, aspect='auto')
            ax.set_xticks(range(len(wide.columns)), [f'{d:g}' for d in wide.columns], fontsize=7)
            ax.set_yticks(range(len(wide.index)), [str(int(v)) for v in wide.index], fontsize=7)
            for a in range(wide.shape[0]):
                for b in range(wide.shape[1]):
                    v = wide.values[a, b]
                    ax.text(b, a, 'n/a' if pd.isna(v) else f'{v:.0f}', ha='center', va='center', fontsize=7,
                            color='white' if pd.isna(v) or v < 60 else 'black')
            if i == 0:
                ax.set_title(f'{t} frames', fontsize=9)
            if j == 0:
                ax.set_ylabel(f'{label}\nhaystack (frames)', fontsize=8)
            if i == len(labels) - 1:
                ax.set_xlabel('needle depth', fontsize=8)
    if im is not None:
        fig.colorbar(im, ax=axes, label='accuracy (%)', fraction=0.03, pad=0.02)
    fig.suptitle(title, fontsize=10)
    _save(fig, path, bbox_inches='tight')
