"""``zoo eval-frames``: zero-shot accuracy of video models across clip lengths (frames) and frame sizes (pixels).

Models come as in ``zoo eval-resolution`` (``--run DIR``, ``--checkpoint PATH``, ``--model NAME --checkpoint PATH``).
Every model is loaded once at its training clip (recorded ``num_frames`` and ``img_size``), then for every
(frames, size) pair a copy is moved there with ``set_input_size(img_size=size, num_frames=frames)`` (which adapts its
position encoding) and evaluated on the video folder: ``frames`` frames at the segment midpoints (MVBench's rule),
frames resized on the shorter side and centre-cropped to ``size`` pixels, normalised with the model's training
mean / std. Decoded frames are cached on disk per (file, frames, size), so every model sees identical inputs.

Writes ``results.csv``, ``results.json``, ``report.md`` (a frames x size table per model, and model x frames /
model x size tables), ``scaling.png`` (top-1 against frames at the training size and against size at the training
frame count) and ``heatmap_<label>.png`` (frames x size) per model. Everything is rewritten atomically after every
(model, frames, size); a failure (out of memory, a PE that cannot take the grid) is recorded for that cell and the
sweep goes on. The output directory is locked while the sweep runs.
"""
from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import re
import shutil
import tempfile
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd
import torch

from zoo.runs.models import is_zoo_model
from zoo.datasets.splits import make_loader
from zoo.tasks.evaluate import evaluate
from zoo.datasets.files import write_atomic, write_text_atomic
from zoo.runs.checkpoints import write_results_file
from zoo.runs.options import amp_dtype, parse_model_kwargs
from zoo.runs.rundir import STAGING, sweep_output_dir
from zoo.tasks.classification import VideoClassificationTask
from zoo.datasets.splits import configure_clips, open_video_split
from zoo.datasets.video_folder import collate_video_skip_bad
from zoo.runs.models import is_video_model, model_mean_std, video_num_frames
from zoo.datasets import find_split
from .resolution import _check_args, _entries, _load_model, build_eval_parser

__all__ = ['build_frames_parser', 'eval_frames', 'write_frames_report']

_logger = logging.getLogger('zoo.eval')

_RESULT_FILES = ('results.csv', 'results.json', 'report.md', 'scaling.png')
_IMAGE_ONLY = ('crop_pct', 'interpolation', 'channels_last')


def build_frames_parser(prog: str = 'zoo eval-frames') -> argparse.ArgumentParser:
    p = build_eval_parser(prog)
    p.description = ('Zero-shot top-1/top-5 of video models (pe_video_vit_*) at several clip lengths and frame sizes, '
                     'on a video folder (DATA/val/<class>/*.mp4, DATA/test or DATA itself). Writes OUTPUT/results.csv, '
                     'results.json, report.md, scaling.png and heatmap_<model>.png.')
    p.epilog = ('Models as in zoo eval-resolution: --run DIR (final checkpoint-last.pth), --checkpoint PATH or --model '
                'NAME --checkpoint PATH. Frames are sampled at segment midpoints, resized on the shorter side and '
                'centre-cropped (--crop-pct, --interpolation and --channels-last apply to images only). Example: '
                'zoo eval-frames --run runs/rope3d --run runs/sincos --data-dir data/synthetic-videos --frames 4 8 16 '
                '32 --sizes 24 32 48 64 --output runs/eval-frames')
    p.add_argument('--frames', type=int, nargs='+', required=True, metavar='T',
                   help='clip lengths to evaluate (frames; multiples of each model\'s tubelet size)')
    p.add_argument('--frame-cache', metavar='DIR', default=None,
                   help='keep decoded frames here between runs (default: a temporary folder removed at the end)')
    for action in p._actions:
        if action.dest == 'output':
            action.default = 'eval-frames'
    return p


def _short_name(model_name: str) -> str:
    """``pe_video_vit_tiny_patch16_rope3d_224`` -> ``rope3d``; other names unchanged."""
    m = re.fullmatch(r'pe_video_vit_[a-z]+_patch\d+_(.+)_\d+', model_name)
    return m.group(1) if m else model_name


def _slug(label: str) -> str:
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', label).strip('_') or 'model'


def _check_frames_args(args) -> None:
    _check_args(args)
    if any(f < 1 for f in args.frames):
        raise ValueError(f'--frames must be positive, got {args.frames}')
    given = [f'--{k.replace("_", "-")}' for k in _IMAGE_ONLY if getattr(args, k) not in (None, False)]
    if given:
        raise ValueError(f'{", ".join(given)} apply to image models; video frames are resized on the shorter side and '
                         'centre-cropped to each --sizes value')


def _load_video_models(args, classes: List[str], data_root: str) -> List[Dict[str, Any]]:
    """Load every model at its training clip and check every (frames, size) before any evaluation."""
    cli_kwargs = parse_model_kwargs(args.model_kwargs)
    loaded = []
    for i, entry in enumerate(_entries(args)):
        model, meta = _load_model(entry, cli_kwargs, use_ema=args.use_ema, force=args.force)
        name = meta.get('model_name', entry['model'])
        if not is_video_model(model):
            raise ValueError(f'{name} is an image model; zoo eval-frames evaluates video models (pe_video_vit_*); use '
                             'zoo eval-resolution for images')
        if meta.get('class_names') and list(meta['class_names']) != list(classes):
            raise ValueError(f'{entry["checkpoint"]!r} was trained on classes {meta["class_names"][:5]}... '
                             f'({len(meta["class_names"])}), but {data_root!r} has {classes[:5]}... ({len(classes)}); '
                             'pass a --class-map listing the training classes in order')
        if model.num_classes != len(classes):
            raise ValueError(f'{name} predicts {model.num_classes} classes but {data_root!r} has {len(classes)} '
                             'class folders')
        tubelet, patch = model.patch_embed.tubelet_size, model.patch_embed.patch_size[0]
        bad_frames = [f for f in args.frames if f % tubelet]
        if bad_frames:
            raise ValueError(f'--frames {bad_frames} are not divisible by the tubelet size {tubelet} of {name}; use '
                             f'multiples of {tubelet}')
        bad_sizes = [s for s in args.sizes if s % patch]
        if bad_sizes and not model.dynamic_img_pad:
            raise ValueError(f'--sizes {bad_sizes} are not divisible by the patch size {patch} px of {name}; use '
                             f'multiples of {patch}')
        data_cfg = dict(meta.get('data_config') or {})
        mean, std = model_mean_std(model, args.mean or data_cfg.get('mean'), args.std or data_cfg.get('std'))
        label = args.label[i] if args.label else _short_name(name)
        seed = (meta.get('args') or {}).get('seed')
        loaded.append(dict(model=model.eval(), name=name, label=label, seed=seed, checkpoint=entry['checkpoint'],
                           train_size=int(meta.get('img_size') or model.patch_embed.img_size[0]),
                           train_frames=int(meta.get('num_frames') or video_num_frames(model)), mean=mean, std=std,
                           weights='EMA' if args.use_ema else 'raw'))
    labels = [m['label'] for m in loaded]
    for m in loaded:
        if labels.count(m['label']) > 1 and not args.label:
            m['label'] += f' (seed {m["seed"]})' if m['seed'] is not None else f' #{labels.index(m["label"]) + 1}'
    if len({m['label'] for m in loaded}) != len(loaded):
        raise ValueError(f'model labels are not unique: {[m["label"] for m in loaded]}; pass one --label per model')
    return loaded


def _eval_root(args) -> str:
    if args.split:
        return find_split(args.data_dir, [args.split], 'evaluation')
    if not os.path.isdir(args.data_dir):
        raise FileNotFoundError(f'data dir {args.data_dir!r} does not exist')
    return next((os.path.join(args.data_dir, n) for n in ('val', 'test')
                 if os.path.isdir(os.path.join(args.data_dir, n))), args.data_dir)


def eval_frames(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-frames`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model, frames and size; a failed evaluation has an ``error``), ``paths`` (the written
        files), ``unreadable`` (count) and ``failed`` (count of failed evaluations).

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError / zoo.errors.ZooError: user
            errors, before any evaluation (an image model, frames not divisible by a tubelet, an output dir in use).
    """
    args = build_frames_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    _check_frames_args(args)
    with sweep_output_dir(args.output, 'zoo eval-frames', args.overwrite) as staged:
        cache = args.frame_cache or tempfile.mkdtemp(prefix='zoo-frames-')
        try:
            return _sweep(args, staged=staged, cache_dir=cache)
        finally:
            if not args.frame_cache:
                shutil.rmtree(cache, ignore_errors=True)


def _sweep(args, staged: bool, cache_dir: str) -> Dict[str, Any]:
    frames, sizes = sorted(dict.fromkeys(args.frames)), sorted(dict.fromkeys(args.sizes))
    device = torch.device(args.device or ('cuda' if torch.cuda.is_available() else 'cpu'))
    dtype = amp_dtype(args.amp or args.amp_dtype is not None, args.amp_dtype, device.type)
    root = _eval_root(args)
    probe = open_video_split(root, args.data_dir, args.max_per_class, args.class_map)
    classes = probe.classes
    loaded = _load_video_models(args, classes, root)
    target = os.path.join(args.output, STAGING) if staged else args.output
    if os.path.isdir(os.path.join(args.output, STAGING)):
        shutil.rmtree(os.path.join(args.output, STAGING))
    os.makedirs(target, exist_ok=True)
    task = VideoClassificationTask(len(classes))
    models = [dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'], train_size=m['train_size'],
                   train_frames=m['train_frames'], weights=m['weights'], family=type(m['model'].pe).family
                   if is_zoo_model(m['model']) else "timm's own",
                   adaptation=getattr(getattr(m['model'], 'pe', None), 'adaptation', 'n/a')) for m in loaded]
    protocol = dict(data_root=root, num_classes=len(classes), frames=frames, sizes=sizes, batch_size=args.batch_size,
                    device=str(device), amp=dtype is not None, max_per_class=args.max_per_class, zero_shot=True,
                    sampling='uniform, segment midpoints', resize='shorter side, centre crop', unreadable=[],
                    weights='EMA' if args.use_ema else 'raw')
    total = len(loaded) * len(frames) * len(sizes)
    rows: List[Dict[str, Any]] = []
    unreadable: Dict[str, str] = {}
    paths: Dict[str, str] = {}
    for m in loaded:
        for t in frames:
            for s in sizes:
                rows.append(_eval_one(args, m, t, s, root, device, dtype, task, cache_dir, unreadable))
                protocol['unreadable'] = sorted([p, e] for p, e in unreadable.items())
                paths = write_frames_report(rows, models, protocol, target, notes=args.note, total=total)
    if staged:
        for name in os.listdir(target):
            os.replace(os.path.join(target, name), os.path.join(args.output, name))
        shutil.rmtree(target)
        paths = {k: os.path.join(args.output, os.path.basename(v)) for k, v in paths.items()}
    if args.results_file:
        write_results_file(args.results_file, rows)
    failed = [r for r in rows if r.get('error')]
    if failed:
        _logger.warning('%d of %d evaluations failed (listed in %s): %s', len(failed), total, paths['md'],
                        '; '.join(f'{r["label"]} @ {r["frames"]} x {r["size"]} px: {r["error"]}' for r in failed[:3]))
    return dict(rows=rows, paths=paths, unreadable=len(unreadable), failed=len(failed))


def _eval_one(args, m: Dict[str, Any], frames: int, size: int, root: str, device: torch.device, dtype, task,
              cache_dir: str, unreadable: Dict[str, str]) -> Dict[str, Any]:
    """Evaluate one model at one (frames, size); a failure becomes the row's ``error``."""
    row = dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'], pe=getattr(m['model'], 'pe_name', ''),
               weights=m['weights'], train_frames=m['train_frames'], train_size=m['train_size'], frames=frames,
               size=size, frame_scale=round(frames / m['train_frames'], 4), scale=round(size / m['train_size'], 4))
    model = None
    try:
        ds = configure_clips(open_video_split(root, args.data_dir, args.max_per_class, args.class_map), frames, size,
                             m['mean'], m['std'], train=False, cache_dir=cache_dir)
        model = copy.deepcopy(m['model'])
        if (frames, size) != (m['train_frames'], m['train_size']):
            model.set_input_size(img_size=size, num_frames=frames)
        model.to(device)
        loader = make_loader(ds, args.batch_size, args.workers, args.pin_mem and device.type == 'cuda',
                             collate_fn=collate_video_skip_bad)
        counts = evaluate(model, loader, device, task, dtype,
                          progress=None if args.no_progress else f'{m["label"]} @ {frames}f x {size}px')
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # out of memory, a PE that cannot take this grid, ...: record and go on
        del model
        if device.type == 'cuda':
            torch.cuda.empty_cache()
        detail = ' '.join(str(e).split())[:300]
        _logger.error('%s @ %d frames x %d px failed: %s: %s', m['label'], frames, size, type(e).__name__, detail)
        row.update(top1=float('nan'), top5=float('nan'), correct1=0, correct5=0, n=0, unreadable=0,
                   loss=float('nan'), clips_per_s=float('nan'), error=f'{type(e).__name__}: {detail}')
        return row
    for b in counts.bad:
        unreadable[b.path] = b.error
    row.update(top1=counts.top1, top5=counts.top5, correct1=counts.correct1, correct5=counts.correct5, n=counts.n,
               unreadable=len(counts.bad), loss=counts.loss, clips_per_s=counts.images_per_s, error='')
    _logger.info('%-16s %3d frames x %4d px  top1 %6.2f  top5 %6.2f  (%d/%d correct, %d unreadable)  %.1f clips/s',
                 m['label'], frames, size, counts.top1, counts.top5, counts.correct1, counts.n, len(counts.bad),
                 counts.images_per_s)
    return row


# ---------------------------------------------------------------------------------------------------------- report
def _fmt(v: float, digits: int = 1) -> str:
    return 'n/a' if pd.isna(v) else f'{v:.{digits}f}'


def _table(df: pd.DataFrame, index: str, columns: str, unit: str, mark: Optional[Dict[str, int]] = None,
           bold_best: bool = True, digits: int = 1) -> str:
    """Markdown table of ``top1`` with rows ``index`` and columns ``columns``; best per column in bold, the training
    value of each row (``mark``: row -> column value) marked ◦, failed cells named."""
    wide = df.pivot_table(index=index, columns=columns, values='top1', sort=False, dropna=False)
    rows = list(dict.fromkeys(df[index]))
    wide = wide.reindex(rows)
    failed = {(r[index], r[columns]) for _, r in df.iterrows() if isinstance(r.get('error'), str) and r['error']}
    cols = sorted(wide.columns)
    best = wide.max()
    lines = [f'| {index} | ' + ' | '.join(f'{c} {unit}' for c in cols) + ' |', '|' + '---|' * (len(cols) + 1)]
    for r in rows:
        cells = []
        for c in cols:
            v = wide.loc[r, c]
            text = 'failed' if (r, c) in failed else _fmt(v, digits)
            if bold_best and not pd.isna(v) and round(v, digits) == round(best[c], digits):
                text = f'**{text}**'
            if mark is not None and mark.get(r) == c:
                text += ' ◦'
            cells.append(text)
        lines.append(f'| {r} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def plot_frames_scaling(df: pd.DataFrame, path: str, title: str) -> None:
    """Two panels: top-1 against frames at each model's training size, and against size at its training frames."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
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
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png'))
    plt.close(fig)


def _color_range(values) -> tuple:
    """Colour limits spanning the finite values (whole points), so that small differences stay visible."""
    import numpy as np
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return 0., 100.
    lo, hi = float(np.floor(v.min())), float(np.ceil(v.max()))
    return (lo, hi) if hi > lo else (lo - 1., hi + 1.)


def plot_heatmap(part: pd.DataFrame, path: str, title: str) -> None:
    """Top-1 over frames (rows) x size (columns) for one model, values written in the cells."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    wide = part.pivot_table(index='frames', columns='size', values='top1', dropna=False).sort_index()
    fig, ax = plt.subplots(figsize=(1.1 * len(wide.columns) + 2.2, 0.7 * len(wide.index) + 1.6), dpi=120)
    lo, hi = _color_range(wide.values)
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
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png'))
    plt.close(fig)


def write_frames_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any],
                        out_dir: str, notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write ``results.csv``, ``results.json``, ``report.md``, ``scaling.png`` and one ``heatmap_<label>.png`` per
    model (each atomically). Rows: one per (model, frames, size) with ``label, frames, size, train_frames,
    train_size, top1, top5, n, clips_per_s, error``. Returns the paths (``csv``, ``json``, ``md``, ``png`` and
    ``heatmap:<label>``)."""
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
    plot_frames_scaling(df, paths['png'], f'Zero-shot frames / size sweep on {where} ({n} clips)')
    md = ['# Frames x size extrapolation: top-1 accuracy (%)', '']
    if len(rows) < total:
        md += [f'**Incomplete: {len(rows)} of {total} (model, frames, size) evaluations done** (the files are '
               'rewritten after every evaluation).', '']
    md += [f'Data: `{protocol["data_root"]}`: {n} readable clips, {protocol["num_classes"]} classes. Bold: best model '
           'per column; ◦: the model\'s training value.', '']
    train_f = {m['label']: m['train_frames'] for m in models}
    train_s = {m['label']: m['train_size'] for m in models}
    at_size = df[df['size'] == df['train_size']]
    at_frames = df[df['frames'] == df['train_frames']]
    if len(at_size):
        md += ['### Top-1 against frames (at each model\'s training size)', '',
               _table(at_size, 'label', 'frames', 'f', train_f), '']
    if len(at_frames):
        md += ['### Top-1 against frame size (at each model\'s training frame count)', '',
               _table(at_frames, 'label', 'size', 'px', train_s), '']
    md += ['![top-1 against frames and size](scaling.png)', '', '## Per model: frames (rows) x size (columns)', '']
    for label, part in df.groupby('label', sort=False):
        key = f'heatmap:{label}'
        paths[key] = os.path.join(out_dir, f'heatmap_{_slug(label)}.png')
        plot_heatmap(part, paths[key], f'{label}: zero-shot top-1')
        part = part.assign(frames_label=part['frames'].map(lambda t: f'{t} frames'))
        md += [f'### {label}', '', _table(part, 'frames_label', 'size', 'px', bold_best=False).replace(
            '| frames_label |', '| frames |'), '', f'![{label}]({os.path.basename(paths[key])})', '']
    if failed:
        md += ['### Failed evaluations', '']
        md += [f'- {r["label"]} at {r["frames"]} frames x {r["size"]} px: {r["error"]}' for r in failed]
        md.append('')
    for note in notes:
        md += [note, '']
    bad = protocol.get('unreadable', [])
    md += ['## Protocol', '',
           '- **Zero-shot**: each model is loaded once at its training clip (strict key and shape check) and moved '
           'to every (frames, size) with `set_input_size(img_size=..., num_frames=...)`, which adapts its position '
           'encoding as listed below.',
           f'- **Clips**: {protocol["sampling"]} frame sampling (MVBench\'s rule), frames resized on the shorter side '
           'and centre-cropped, normalised with each model\'s training mean/std.',
           f'- **Accuracy** = correct predictions / readable clips over the whole folder. Unreadable clips: {len(bad)} '
           '(excluded from every count).',
           f'- Batch {protocol["batch_size"]}, {protocol["device"]}{", AMP" if protocol.get("amp") else ""}; '
           f'weights: {protocol["weights"]}.', '',
           '| model | timm model | checkpoint | PE family | trained at | how the PE adapts to a new grid |',
           '|---|---|---|---|---|---|']
    for m in models:
        md.append(f'| {m["label"]} | `{m["model"]}` | `{m["checkpoint"]}` | {m["family"]} | {m["train_frames"]} '
                  f'frames x {m["train_size"]} px | {m["adaptation"]} |')
    if bad:
        md += ['', '## Unreadable clips', ''] + [f'- `{p}`: {e}' for p, e in bad[:50]]
    write_text_atomic(paths['md'], '\n'.join(md) + '\n')
    return paths
