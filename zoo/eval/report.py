"""Write a resolution sweep: ``results.csv``, ``results.json``, ``report.md`` and ``scaling.png``, each atomically.

The sweep rewrites all four after every finished (model, size), so an interrupted sweep keeps what it finished; the
report says how many evaluations are done and lists the ones that failed (out of memory, ...).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from zoo.common.io import write_atomic, write_text_atomic

__all__ = ['write_report', 'markdown_table', 'plot_scaling']


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


def plot_scaling(df: pd.DataFrame, path: str, title: str) -> None:
    """Top-1 against input size, one line per model; each model's training size marked with a star."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, part in df.groupby('label', sort=False):
        part = part.sort_values('size')
        line, = ax.plot(part['size'], part['top1'], marker='o', ms=4, label=label)
        trained = part[part['size'] == part['train_size']]
        if len(trained):
            ax.plot(trained['size'], trained['top1'], marker='*', ms=14, color=line.get_color(), mec='black',
                    mew=0.6, ls='none')
    for size in sorted(set(df['train_size'])):
        ax.axvline(size, color='grey', ls=':', lw=1)
        ax.annotate(f'train {size} px', (size, 0.01), xycoords=('data', 'axes fraction'), fontsize=8,
                    color='grey', ha='left', xytext=(3, 0), textcoords='offset points')
    ax.set_xlabel('evaluation input size (px)')
    ax.set_ylabel('top-1 accuracy (%)')
    ax.set_xticks(sorted(set(df['size'])))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0.)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png'))
    plt.close(fig)


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
        Paths of ``csv``, ``json``, ``md`` and ``png``.
    """
    df = pd.DataFrame(rows)
    paths = {k: os.path.join(out_dir, n) for k, n in
             dict(csv='results.csv', json='results.json', md='report.md', png='scaling.png').items()}
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
           '- **Weights**: ' + ', '.join(f'{m["label"]}: {m.get("weights", "raw")}' for m in models) +
           ' (raw = the trained weights, EMA = their exponential moving average, chosen with `--use-ema`).',
           '', '| model | timm model | checkpoint | weights | PE family | trained at | how the PE adapts to a new '
           'grid |', '|---|---|---|---|---|---|---|']
    for m in models:
        md.append(f'| {m["label"]} | `{m["model"]}` | `{m["checkpoint"]}` | {m.get("weights", "raw")} | '
                  f'{m["family"]} | {m["train_size"]} px | {m["adaptation"]} |')
    if bad:
        md += ['', '## Unreadable images', ''] + [f'- `{p}`: {e}' for p, e in bad[:50]]
        if len(bad) > 50:
            md.append(f'- ... and {len(bad) - 50} more (see results.json)')
    write_text_atomic(paths['md'], '\n'.join(md) + '\n')
    return paths
