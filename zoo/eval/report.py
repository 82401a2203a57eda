"""Write a resolution sweep: ``results.csv``, ``results.json``, ``report.md``, ``scaling.png`` and ``heatmap.png``,
each atomically.

The sweep rewrites all four after every finished (model, size), so an interrupted sweep keeps what it finished; the
report says how many evaluations are done and lists the ones that failed (out of memory, ...).
"""
from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from zoo.datasets.files import write_atomic, write_text_atomic

__all__ = ['write_report', 'markdown_table', 'plot_scaling', 'plot_heatmap', 'series_styles', 'relative_to_train',
           'relative_table', 'rows_from_markdown', 'replot', 'encoding_family',
           'strategy_tables', 'plot_strategies', 'has_strategies']


def _fmt(value: float, digits: int = 2) -> str:
    return 'n/a' if pd.isna(value) else f'{value:.{digits}f}'


def markdown_table(df: pd.DataFrame, metric: str, digits: int = 2, higher_is_better: bool = True) -> str:
    """A model x size markdown table of ``metric``, the best value of every size column in bold (ties too).

    Args:
        df: one row per (label, size) with columns ``label``, ``size``, ``train_size`` and ``metric``.
        metric: the column to tabulate, e.g. ``top1``.
    """
    wide = df.pivot_table(index='label', columns='size', values=metric, sort=False, dropna=False)
    failed = {}
    if 'error' in df:
        failed = {(r['label'], r['size']) for _, r in df.iterrows() if isinstance(r['error'], str) and r['error']}
    labels = list(dict.fromkeys(df['label']))
    wide = wide.reindex(labels)
    train = df.groupby('label', sort=False)['train_size'].first()
    sizes = list(wide.columns)
    head = '| model | trained at | ' + ' | '.join(f'{s} px' for s in sizes) + ' |'
    lines = [head, '|' + '---|' * (len(sizes) + 2)]
    best = wide.max() if higher_is_better else wide.min()
    best = best.reindex(sizes)
    for label in labels:
        cells = []
        for s in sizes:
            v = wide.loc[label, s]
            text = 'failed' if (label, s) in failed else _fmt(v, digits)
            if not pd.isna(v) and round(v, digits) == round(best[s], digits):
                text = f'**{text}**'
            if s == train[label]:
                text += ' ◦'
            cells.append(text)
        lines.append(f'| {label} | {train[label]} px | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


_PALETTE = ('#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
            '#000000', '#7f7f7f', '#393b79', '#637939', '#7b4173')
_MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '<', '>', 'h', 'p', '*', 'd', '8', 'H')
_LINESTYLES = ('-', '--', ':', '-.', (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2, 2, 2)))
_SEED = re.compile(r'\s*\(seed \d+\)|\s*#\d+$')


def encoding_family(row: Any) -> str:
    """The colour group of a series: the leading letters of its encoding name (``rope_axial``, ``rope_mixed``,
    ``rope_mixed_ape`` -> ``rope``; ``comrope_ap/ld`` -> ``comrope``; ``irpe_k/qkv`` -> ``irpe``; ``peg0to5`` ->
    ``peg``), from the ``pe`` column, else from the label without its seed suffix."""
    pe = row.get('pe') if hasattr(row, 'get') else None
    if not (isinstance(pe, str) and pe):
        pe = _SEED.sub('', str(row['label'])).split(' · ')[0].strip().split(' ')[-1]
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


def relative_to_train(df: pd.DataFrame, metric: str = 'top1') -> pd.Series:
    """``metric`` minus the same model's ``metric`` at its training size (points), per row; NaN where a model was
    not evaluated at its training size."""
    at_train = df[df['size'] == df['train_size']].groupby('label')[metric].first()
    return df[metric] - df['label'].map(at_train)


def plot_scaling(df: pd.DataFrame, path: str, title: str) -> None:
    """Two panels against input size: top-1 (%), and top-1 relative to each model's own training-size top-1
    (points). Colour per encoding, line style per variant / seed, a marker per series; each model's training size is
    a star (and a dotted line); the legend sits right of the axes."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

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
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png', bbox_inches='tight'))
    plt.close(fig)


def plot_heatmap(df: pd.DataFrame, path: str, title: str, metric: str = 'top1') -> None:
    """Model (rows) x size (columns) heatmap of ``metric``, values in the cells, each model's training size boxed."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
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
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png'))
    plt.close(fig)


_STRATEGY_STYLE = {'none': ('#000000', 'o'), 'pi': ('#1f77b4', 's'), 'ntk': ('#2ca02c', '^'), 'yarn': ('#d62728', 'D')}


def has_strategies(df: pd.DataFrame) -> bool:
    """True when the rows carry more than one extrapolation strategy (``zoo eval-resolution --extrapolation``)."""
    return 'extrapolation' in df and df['extrapolation'].fillna('').astype(str).str.len().gt(0).any() \
        and df['extrapolation'].dropna().nunique() > 1


def strategy_tables(df: pd.DataFrame, digits: int = 2) -> str:
    """Markdown: per evaluated size, model (without strategy) x strategy top-1, the best strategy of each row bold."""
    d = df[df['extrapolation'].fillna('').astype(str) != '']
    strategies = list(dict.fromkeys(d['extrapolation']))
    out = []
    for size in sorted(set(d['size'])):
        part = d[d['size'] == size]
        wide = part.pivot_table(index='base_label', columns='extrapolation', values='top1', sort=False,
                                dropna=False).reindex(columns=strategies)
        train = part.groupby('base_label', sort=False)['train_size'].first()
        scales = sorted({round(size / t, 3) for t in train})
        out += [f'**{size} px** ({", ".join(f"{x:g}" for x in scales)}x the training size)', '',
                '| model | ' + ' | '.join(strategies) + ' |', '|' + '---|' * (len(strategies) + 1)]
        for label, vals in wide.iterrows():
            best = vals.max()
            cells = [('**' + _fmt(v, digits) + '**') if not pd.isna(v) and round(v, digits) == round(best, digits)
                     else _fmt(v, digits) for v in vals]
            out.append(f'| {label} | ' + ' | '.join(cells) + ' |')
        out.append('')
    return '\n'.join(out).rstrip()


def plot_strategies(df: pd.DataFrame, path: str, title: str) -> None:
    """One panel pair per encoding: top-1 against size (colour and marker per strategy, line style per seed or
    variant), and top-1 minus the ``none`` strategy of the same model (points); the training size starred."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

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
            color, marker = _STRATEGY_STYLE.get(strategy, ('#7f7f7f', 'x'))
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
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png', bbox_inches='tight'))
    plt.close(fig)


def relative_table(df: pd.DataFrame, digits: int = 1) -> str:
    """Markdown model x size table of top-1 minus the model's own training-size top-1 (points)."""
    d = df.assign(rel=relative_to_train(df))
    labels = list(dict.fromkeys(d['label']))
    wide = d.pivot_table(index='label', columns='size', values='rel', sort=False, dropna=False).reindex(labels)
    train = d.groupby('label', sort=False)['train_size'].first()
    sizes = list(wide.columns)
    lines = ['| model | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|' + '---|' * (len(sizes) + 1)]
    for label in labels:
        cells = []
        for s in sizes:
            v = wide.loc[label, s]
            cells.append('◦' if s == train[label] else ('n/a' if pd.isna(v) else f'{v:+.{digits}f}'))
        lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def write_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any], out_dir: str,
                 notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write the four result files (each atomically).

    Args:
        rows: one dict per (model, size): ``label, size, train_size, top1, top5, correct1, correct5, n, unreadable,
            images_per_s`` and more.
        models: one dict per model: ``label, model, checkpoint, family, adaptation, train_size``.
        protocol: ``data_root, num_classes, crop_pct, interpolation, batch_size, device, amp, unreadable`` (list of
            ``[path, error]``), ``max_per_class``.
        out_dir: existing folder.
        notes: extra paragraphs for the report (e.g. how small a run was).
        total: the number of (model, size) evaluations planned; the report says "incomplete" while fewer rows exist.
            A row with a non-empty ``error`` is a failed evaluation (shown as "failed" and listed).

    Returns:
        Paths of ``csv``, ``json``, ``md``, ``png`` (top-1 and relative top-1 against size) and ``heatmap``.
    """
    df = pd.DataFrame(rows)
    paths = {k: os.path.join(out_dir, n) for k, n in
             dict(csv='results.csv', json='results.json', md='report.md', png='scaling.png',
                  heatmap='heatmap.png').items()}
    total = len(rows) if total is None else total
    failed = [r for r in rows if r.get('error')]
    status = dict(done=len(rows), total=total, failed=len(failed), complete=len(rows) >= total)
    write_text_atomic(paths['csv'], df.to_csv(index=False))
    write_text_atomic(paths['json'], json.dumps(dict(status=status, protocol=protocol, models=models, results=rows),
                                                indent=1, default=str))
    n = int(df['n'].max()) if len(df) and df['n'].notna().any() else 0
    where = '/'.join(os.path.normpath(protocol['data_root']).split(os.sep)[-2:])
    title = f'Zero-shot resolution sweep on {where} ({n} images)'
    plot_scaling(df, paths['png'], title)
    plot_heatmap(df, paths['heatmap'], f'top-1 (%): {title}')
    if has_strategies(df):
        paths['strategies'] = os.path.join(out_dir, 'extrapolation.png')
        plot_strategies(df, paths['strategies'], f'Extrapolation strategies: {title}')

    crop = protocol['crop_pct']
    bad = protocol.get('unreadable', [])
    subset = f', first {protocol["max_per_class"]} images per class' if protocol.get('max_per_class') else ''
    md = [f'# Resolution extrapolation: top-1 accuracy (%)', '']
    if len(rows) < total:
        md += [f'**Incomplete: {len(rows)} of {total} (model, size) evaluations done** (the sweep is running or was '
               'interrupted; the files are rewritten after every evaluation).', '']
    md += [
          f'Data: `{protocol["data_root"]}`: {n} readable images, {protocol["num_classes"]} classes{subset}. '
          f'Bold: best model per size; ◦: the model\'s training size.', '',
          markdown_table(df, 'top1'), '',
          '### Top-1 relative to each model\'s training size (points)', '',
          'Top-1 at each size minus the same model\'s top-1 at its training size (◦).', '', relative_table(df), '',
          '### Top-1 heatmap (model x size)', '', '![top-1 heatmap, model x size](heatmap.png)', '',
          *(['### Extrapolation strategies (top-1 %)', '',
             'Each model under each training-free strategy (`--extrapolation`; `zoo.encodings.extrapolation`): '
             'none = integer positions extrapolate, pi = position interpolation, ntk = NTK-aware base scaling, '
             'yarn = NTK-by-parts ramp + attention temperature. Factors = evaluated grid / training grid per axis. '
             'Bold: best strategy of each model at that size.', '', strategy_tables(df), '',
             '![top-1 per strategy](extrapolation.png)', ''] if has_strategies(df) else []),
          '### Top-5 accuracy (%)', '', markdown_table(df, 'top5'), '',
          f'### Throughput (images/s, forward only, batch {protocol["batch_size"]}, {protocol["device"]}'
          f'{", AMP" if protocol.get("amp") else ""})', '', markdown_table(df, 'images_per_s', digits=0), '',
          '![top-1 against resolution](scaling.png)', '']
    if failed:
        md += ['### Failed evaluations', '', 'These (model, size) pairs did not finish; the sweep went on with the '
               'others.', '']
        md += [f'- {r["label"]} at {r["size"]} px: {r["error"]}' for r in failed]
        md.append('')
    for note in notes:
        md += [note, '']
    md += ['## Protocol', '',
           '- **Zero-shot**: no fine-tuning at any evaluation size. Each model is loaded once at its training size '
           '(strict key and shape check) and moved to every size with `set_input_size`, which adapts the position '
           'encoding as listed in the table below.',
           f'- **Preprocessing** at size *s* (timm `create_transform`, eval mode): resize the shorter side to '
           f'*s* / crop_pct with {protocol["interpolation"]} interpolation, center-crop *s* x *s*, normalise with '
           f'each model\'s training mean/std. crop_pct = {crop}.',
           '- **Accuracy** = correct predictions / readable images, counted over the whole folder (top-5 = label '
           'among the 5 highest logits).',
           f'- **Unreadable images**: {len(bad)} (excluded from every count' + (', listed below).' if bad else ').'),
           '- Throughput times only the model forward (after one warm-up batch); data loading is excluded.',
           *([f'- **CLIP zero-shot**: logits = logit scale x cosine(image features, class embeddings); class '
              f'embeddings from open_clip\'s `build_zero_shot_classifier` over the class names and the '
              f'`{protocol["clip_templates"]}` templates.'] if protocol.get('clip_templates') else []),
           '- **Weights**: ' + ', '.join(f'{m["label"]}: {m.get("weights", "raw")}' for m in models) +
           ' (raw = the trained weights, EMA = their exponential moving average, chosen with `--use-ema`).',
           '', '| model | timm model | checkpoint | weights | PE family | trained at | how the PE adapts to a new '
           'grid | extrapolation |', '|---|---|---|---|---|---|---|---|']
    for m in models:
        md.append(f'| {m["label"]} | `{m["model"]}` | `{m["checkpoint"]}` | {m.get("weights", "raw")} | '
                  f'{m["family"]} | {m["train_size"]} px | {m["adaptation"]} | {m.get("extrapolation") or "-"} |')
    if bad:
        md += ['', '## Unreadable images', ''] + [f'- `{p}`: {e}' for p, e in bad[:50]]
        if len(bad) > 50:
            md.append(f'- ... and {len(bad) - 50} more (see results.json)')
    write_text_atomic(paths['md'], '\n'.join(md) + '\n')
    return paths


def rows_from_markdown(path: str) -> List[Dict[str, Any]]:
    """Rows (``label, pe, train_size, size, top1``) of the first top-1 table in a report or results page: a
    ``| model | trained at | 24 px | ... |`` table; bold, ``◦`` marks and non-``px`` columns are ignored.

    Raises:
        ValueError: no such table in ``path``.
    """
    with open(path) as f:
        lines = [ln.strip() for ln in f]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('| model | trained at |')), None)
    if start is None:
        raise ValueError(f'{path!r} has no "| model | trained at | <size> px |" table')
    head = [c.strip() for c in lines[start].strip('|').split('|')]
    cols = {i: int(c[:-3]) for i, c in enumerate(head) if re.fullmatch(r'\d+ px', c)}
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith('|'):
            break
        cells = [c.strip() for c in ln.strip('|').split('|')]
        label, train = cells[0], int(cells[1].split()[0])
        for i, size in cols.items():
            text = cells[i].replace('*', '').replace('◦', '').strip()
            value = float('nan') if text in ('n/a', 'failed', '') else float(text)
            rows.append(dict(label=label, pe=_SEED.sub('', label).strip(), train_size=train, size=size, top1=value))
    return rows


def replot(argv: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """``python -m zoo.eval.report``: redraw the scaling plot and the heatmap from saved results (a sweep's
    ``results.csv`` / ``results.json``, or the top-1 table of a markdown page), without evaluating anything."""
    p = argparse.ArgumentParser(prog='python -m zoo.eval.report', description=replot.__doc__)
    p.add_argument('results', help='results.csv, results.json, or a .md page with a "| model | trained at |" table')
    p.add_argument('--png', required=True, help='scaling plot to write')
    p.add_argument('--heatmap', help='heatmap to write (model x size)')
    p.add_argument('--csv', help='also write the rows read (e.g. a table parsed from markdown) to this CSV')
    p.add_argument('--strategies', help='per-strategy plot to write (rows of an --extrapolation sweep)')
    p.add_argument('--title', default='Zero-shot resolution sweep')
    args = p.parse_args(argv)
    if args.results.endswith('.json'):
        with open(args.results) as f:
            df = pd.DataFrame(json.load(f)['results'])
    elif args.results.endswith('.csv'):
        df = pd.read_csv(args.results)
    else:
        df = pd.DataFrame(rows_from_markdown(args.results))
    if 'error' in df:
        df = df[~df['error'].apply(lambda e: isinstance(e, str) and bool(e))]
    out = dict(png=args.png)
    plot_scaling(df, args.png, args.title)
    if args.strategies and has_strategies(df):
        plot_strategies(df, args.strategies, args.title)
        out['strategies'] = args.strategies
    if args.heatmap:
        plot_heatmap(df, args.heatmap, f'top-1 (%): {args.title}')
        out['heatmap'] = args.heatmap
    if args.csv:
        write_text_atomic(args.csv, df.to_csv(index=False))
        out['csv'] = args.csv
    return out


if __name__ == '__main__':
    for name, path in replot().items():
        print(f'{name}: {path}')
