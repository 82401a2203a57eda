"""The report pages of the three sweeps: ``report.md`` and its plots, built from the rows so far.

Each page function returns ``{file name: text, or a function writing the file at a path}``; the result set writer
(:func:`zoo.sweep.report.write_result_set`) adds ``results.csv``, ``results.json`` and ``manifest.json`` and writes
them all as one update. The sections every page shares (the "incomplete" banner, failed evaluations, notes, the
models table, unreadable inputs) are written once, here.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Callable, Dict, List, Sequence

import pandas as pd

from .plots import (NIAH_TASK, chance_by_panel, plot_accuracy, plot_frames_scaling, plot_grid_heatmap, plot_heatmap,
                    plot_scaling, plot_strategies, plot_vniah)
from .tables import cell, fmt, has_strategies, markdown_table, pivot_markdown, relative_table, strategy_tables

__all__ = ['resolution_page', 'frames_page', 'videoqa_page', 'slug']

Files = Dict[str, Any]

_STRATEGY_TEXT = ('Each model under each training-free strategy (`--extrapolation`; `zoo.encodings.extrapolation`): '
                  'none = integer positions extrapolate, pi = position interpolation, ntk = NTK-aware base scaling, '
                  'yarn = NTK-by-parts ramp + attention temperature. Factors = evaluated grid / training grid per '
                  'axis. Bold: best strategy of each model.')


def slug(label: str) -> str:
    """A file-name-safe form of a model label."""
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', label).strip('_') or 'model'


def _incomplete(rows: List[Dict[str, Any]], total: int, what: str) -> List[str]:
    if len(rows) >= total:
        return []
    return [f'**Incomplete: {len(rows)} of {total} ({what}) evaluations done** (the sweep is running or was '
            'interrupted; `--resume` continues it; the files are rewritten as one set after every evaluation).', '']


def _failed(rows: List[Dict[str, Any]], where: Callable[[Dict[str, Any]], str]) -> List[str]:
    failed = [r for r in rows if r.get('error')]
    if not failed:
        return []
    return ['### Failed evaluations', '', 'These did not finish; the sweep went on with the others (`--resume` tries '
            'them again).', ''] + [f'- {r["label"]} at {where(r)}: {r["error"]}' for r in failed] + ['']


def _notes(notes: Sequence[str]) -> List[str]:
    out: List[str] = []
    for note in notes:
        out += [note, '']
    return out


def _unreadable(bad: Dict[str, str], what: str) -> List[str]:
    if not bad:
        return []
    items = list(bad.items())
    out = ['', f'## Unreadable {what}', ''] + [f'- `{p}`: {e}' for p, e in items[:50]]
    if len(items) > 50:
        out.append(f'- ... and {len(items) - 50} more (see results.json)')
    return out


def _models_table(models: List[Dict[str, Any]], columns: Sequence[tuple]) -> List[str]:
    """The protocol's model table: ``columns`` = ``(heading, model info -> cell text)`` pairs."""
    lines = ['| ' + ' | '.join(cell(h) for h, _ in columns) + ' |', '|' + '---|' * len(columns)]
    return lines + ['| ' + ' | '.join(cell(text(m)) for _, text in columns) + ' |' for m in models]


def _finish(files: Files, md: List[str], unreadable: Dict[str, str], what: str) -> Files:
    """Add the unreadable inputs to the page and the page to the files."""
    files['report.md'] = '\n'.join(md + _unreadable(unreadable, what)) + '\n'
    return files


_MODEL = ('model', lambda m: m['label'])
_NAME = ('timm model', lambda m: f'`{m["model"]}`')
_CHECKPOINT = ('checkpoint', lambda m: f'`{m["checkpoint"]}`')
_FAMILY = ('PE family', lambda m: m['family'])
_ADAPTS = ('how the PE adapts to a new grid', lambda m: m['adaptation'])
_STRATEGY = ('extrapolation', lambda m: m.get('extrapolation') or '-')
_CLIP = ('trained at', lambda m: f'{m["train_frames"]} frames x {m["train_size"]} px')


def _plot(func: Callable[..., None], *args: Any) -> Callable[[str], None]:
    """A writer for the result set: ``func(*args)`` drawn to the path it is given."""
    return lambda path: func(args[0], path, *args[1:])


def _where(protocol: Dict[str, Any]) -> str:
    return '/'.join(os.path.normpath(protocol['data_root']).split(os.sep)[-2:])


# ---------------------------------------------------------------------------------------------------- eval-resolution
def resolution_page(state: Any, models: List[Dict[str, Any]], protocol: Dict[str, Any], notes: Sequence[str]) -> Files:
    """``report.md``, ``scaling.png``, ``heatmap.png`` (and ``extrapolation.png`` with strategies) of a resolution
    sweep.

    Args:
        state: ``rows`` (one per (model, size): ``label, size, train_size, top1, top5, n, images_per_s, error`` and
            more), ``extras`` (``unreadable``: path -> error) and ``total`` (cells planned), as
            :class:`zoo.sweep.engine.SweepState`.
        models: one info dict per model (``label, model, checkpoint, family, adaptation, train_size`` ...).
    """
    rows, total, unreadable = state.rows, state.total, state.extras.get('unreadable', {})
    df = pd.DataFrame(rows)
    files: Files = {}
    n = int(df['n'].max()) if len(df) and df['n'].notna().any() else 0
    title = f'Zero-shot resolution sweep on {_where(protocol)} ({n} images)'
    files['scaling.png'] = _plot(plot_scaling, df, title)
    files['heatmap.png'] = _plot(plot_heatmap, df, f'top-1 (%): {title}')
    if has_strategies(df):
        files['extrapolation.png'] = _plot(plot_strategies, df, f'Extrapolation strategies: {title}')
    subset = f', first {protocol["max_per_class"]} images per class' if protocol.get('max_per_class') else ''
    md = ['# Resolution extrapolation: top-1 accuracy (%)', '', *_incomplete(rows, total, 'model, size'),
          f'Data: `{protocol["data_root"]}`: {n} readable images, {protocol["num_classes"]} classes{subset}. '
          f'Bold: best model per size; ◦: the model\'s training size.', '',
          markdown_table(df, 'top1'), '',
          '### Top-1 relative to each model\'s training size (points)', '',
          'Top-1 at each size minus the same model\'s top-1 at its training size (◦).', '', relative_table(df), '',
          '### Top-1 heatmap (model x size)', '', '![top-1 heatmap, model x size](heatmap.png)', '',
          *(['### Extrapolation strategies (top-1 %)', '', _STRATEGY_TEXT, '', strategy_tables(df), '',
             '![top-1 per strategy](extrapolation.png)', ''] if has_strategies(df) else []),
          '### Top-5 accuracy (%)', '', markdown_table(df, 'top5'), '',
          f'### Throughput (images/s, forward only, batch {protocol["batch_size"]}, {protocol["device"]}'
          f'{", AMP" if protocol.get("amp") else ""})', '', markdown_table(df, 'images_per_s', digits=0), '',
          '![top-1 against resolution](scaling.png)', '',
          *_failed(rows, lambda r: f'{r["size"]} px'), *_notes(notes)]
    md += ['## Protocol', '',
           '- **Zero-shot**: no fine-tuning at any evaluation size. Each model is loaded once at its training size '
           '(strict key and shape check) and moved to every size with `set_input_size`, which adapts the position '
           'encoding as listed in the table below.',
           f'- **Preprocessing** at size *s* (timm `create_transform`, eval mode): resize the shorter side to '
           f'*s* / crop_pct with {protocol["interpolation"]} interpolation, center-crop *s* x *s*, normalise with '
           f'each model\'s training mean/std. crop_pct = {protocol["crop_pct"]}.',
           '- **Accuracy** = correct predictions / readable images, counted over the whole folder (top-5 = label '
           'among the 5 highest logits).',
           f'- **Unreadable images**: {len(unreadable)} (excluded from every count' +
           (', listed below).' if unreadable else ').'),
           '- Throughput times only the model forward (after one warm-up batch); data loading is excluded.',
           *([f'- **CLIP zero-shot**: logits = logit scale x cosine(image features, class embeddings); class '
              f'embeddings from open_clip\'s `build_zero_shot_classifier` over the class names and the '
              f'`{protocol["clip_templates"]}` templates.'] if protocol.get('clip_templates') else []),
           '- **Weights**: ' + ', '.join(f'{m["label"]}: {m.get("weights", "raw")}' for m in models) +
           ' (raw = the trained weights, EMA = their exponential moving average, chosen with `--use-ema`).',
           '']
    md += _models_table(models, [_MODEL, _NAME, _CHECKPOINT, ('weights', lambda m: m.get('weights', 'raw')), _FAMILY,
                                 ('trained at', lambda m: f'{m["train_size"]} px'), _ADAPTS, _STRATEGY])
    return _finish(files, md, unreadable, 'images')


# ------------------------------------------------------------------------------------------------------- eval-frames
def frames_page(state: Any, models: List[Dict[str, Any]], protocol: Dict[str, Any], notes: Sequence[str]) -> Files:
    """``report.md``, ``scaling.png`` and one ``heatmap_<label>.png`` per model (frames x size) of a frames sweep.
    As :func:`resolution_page`; rows: one per (model, frames, size) with ``label, frames, size, train_frames,
    train_size, top1, top5, n, clips_per_s, error``."""
    rows, total, unreadable = state.rows, state.total, state.extras.get('unreadable', {})
    df = pd.DataFrame(rows)
    files: Files = {}
    n = int(df['n'].max()) if len(df) and df['n'].notna().any() else 0
    files['scaling.png'] = _plot(plot_frames_scaling, df, f'Zero-shot frames / size sweep on {_where(protocol)} '
                                                          f'({n} clips)')
    md = ['# Frames x size extrapolation: top-1 accuracy (%)', '', *_incomplete(rows, total, 'model, frames, size'),
          f'Data: `{protocol["data_root"]}`: {n} readable clips, {protocol["num_classes"]} classes. Bold: best model '
          'per column; ◦: the model\'s training value.', '']
    train_f = {m['label']: m['train_frames'] for m in models}
    train_s = {m['label']: m['train_size'] for m in models}
    at_size = df[df['size'] == df['train_size']] if len(df) else df
    at_frames = df[df['frames'] == df['train_frames']] if len(df) else df
    if len(at_size):
        md += ['### Top-1 against frames (at each model\'s training size)', '',
               pivot_markdown(at_size, 'label', 'frames', unit='f', mark=train_f), '']
    if len(at_frames):
        md += ['### Top-1 against frame size (at each model\'s training frame count)', '',
               pivot_markdown(at_frames, 'label', 'size', unit='px', mark=train_s), '']
    if len(at_size) and has_strategies(at_size):
        md += ['### Extrapolation strategies (top-1 %, at each model\'s training size)', '', _STRATEGY_TEXT, '',
               strategy_tables(at_size, axis='frames', unit='frames'), '']
    md += ['![top-1 against frames and size](scaling.png)', '', '## Per model: frames (rows) x size (columns)', '']
    for label, part in df.groupby('label', sort=False):
        name = f'heatmap_{slug(label)}.png'
        files[name] = _plot(plot_grid_heatmap, part, f'{label}: zero-shot top-1')
        part = part.assign(frames_label=part['frames'].map(lambda t: f'{t} frames'))
        md += [f'### {label}', '', pivot_markdown(part, 'frames_label', 'size', unit='px', bold_best=False,
                                                  index_title='frames'), '', f'![{label}]({name})', '']
    md += [*_failed(rows, lambda r: f'{r["frames"]} frames x {r["size"]} px'), *_notes(notes)]
    md += ['## Protocol', '',
           '- **Zero-shot**: each model is loaded once at its training clip (strict key and shape check) and moved '
           'to every (frames, size) with `set_input_size(img_size=..., num_frames=...)`, which adapts its position '
           'encoding as listed below.',
           f'- **Clips**: {protocol["sampling"]} frame sampling (MVBench\'s rule), frames resized on the shorter side '
           'and centre-cropped, normalised with each model\'s training mean/std.',
           f'- **Accuracy** = correct predictions / readable clips over the whole folder. Unreadable clips: '
           f'{len(unreadable)} (excluded from every count).',
           f'- Batch {protocol["batch_size"]}, {protocol["device"]}{", AMP" if protocol.get("amp") else ""}; '
           f'weights: {protocol["weights"]}.', '']
    md += _models_table(models, [_MODEL, _NAME, _CHECKPOINT, _FAMILY, _CLIP, _ADAPTS, _STRATEGY])
    return _finish(files, md, unreadable, 'clips')


# -------------------------------------------------------------------------------------------------------- eval-video
def videoqa_page(state: Any, models: List[Dict[str, Any]], protocol: Dict[str, Any], notes: Sequence[str]) -> Files:
    """``report.md``, ``accuracy.png`` and (with V-NIAH items) ``vniah.png`` of a video-QA sweep. As
    :func:`resolution_page`; rows: one per (model, frames, size) with ``acc``, ``acc_qa``, ``acc_vniah``,
    ``chance_qa``, ``chance_vniah``, ``acc:<task>``, counts and timings; ``state.extras['predictions']``: one dict per
    item and row."""
    rows, total, unreadable = state.rows, state.total, state.extras.get('unreadable', {})
    predictions = state.extras.get('predictions', [])
    df = pd.DataFrame(rows)
    pr = pd.DataFrame(predictions)
    files: Files = {}
    ok = df[df['error'] == ''] if 'error' in df else df
    if len(ok):
        files['accuracy.png'] = _plot(plot_accuracy, ok, f'{protocol["benchmark"]} ({protocol["items"]} questions)')
    has_niah = bool(len(pr)) and (pr['task'] == NIAH_TASK).any() and {'length', 'depth'} <= set(pr.columns)
    if has_niah:
        files['vniah.png'] = _plot(plot_vniah, pr[pr['task'] == NIAH_TASK],
                                   'V-NIAH accuracy (%): haystack length x needle depth')
    lr = protocol['load_report']
    md = [f'# Video QA: {protocol["benchmark"]}, accuracy (%) against frames per clip', '',
          *_incomplete(rows, total, 'model, frames, size'),
          f'Data: `{protocol["data_root"]}`: {protocol["items"]} questions ({lr["rows"]} rows read, skipped: '
          f'{lr["skipped"] or "none"}).', '']
    at_train = ok[ok['size'] == ok['train_size']] if len(ok) else ok

    def table(col: str) -> str:
        return pivot_markdown(at_train, 'label', 'frames', col, unit='f', bold_best=False, index_title='model')
    if len(at_train):
        md += ['### All questions (at each model\'s training frame size)', '', table('acc'), '']
        if 'acc_qa' in at_train and at_train['acc_qa'].notna().any():
            md += ['### QA tasks (V-NIAH excluded)', '', table('acc_qa'), '']
        if 'acc_vniah' in at_train and at_train['acc_vniah'].notna().any():
            md += ['### V-NIAH', '', table('acc_vniah'), '']
        ch = chance_by_panel(at_train)
        md += ['Chance (mean of 1 / options): ' + ', '.join(
            f'{name} {fmt(ch.get(col), 1)}' for col, name in (('acc_qa', 'QA tasks'), ('acc_vniah', 'V-NIAH'))
            if not pd.isna(ch.get(col, math.nan))) + '.', '', '![accuracy against frames](accuracy.png)', '']
        task_cols = [c for c in ok.columns if c.startswith('acc:')]
        if task_cols:
            md += ['### Per task / category', '', '| model | frames | size | ' + ' | '.join(
                cell(c[4:]) for c in task_cols) + ' |', '|' + '---|' * (len(task_cols) + 3)]
            for _, r in ok.iterrows():
                md.append(f'| {cell(r["label"])} | {r["frames"]} | {r["size"]} | ' + ' | '.join(
                    fmt(r[c], 1) for c in task_cols) + ' |')
            md.append('')
    if has_niah:
        md += ['### V-NIAH: haystack length x needle depth', '', '![V-NIAH heatmaps](vniah.png)', '']
    if len(ok):
        md += ['### Answers read and speed', '', '| model | frames | size | n | fallback (unparsed) | unreadable | '
               'videos decoded | decode s | cache read s | model s |', '|' + '---|' * 10]
        for _, r in ok.iterrows():
            md.append(f'| {cell(r["label"])} | {r["frames"]} | {r["size"]} | {r["n"]} | {r["fallback"]} | '
                      f'{r["unreadable"]} | {r["decoded"]} | {r["decode_s"]:.1f} | '
                      f'{r["read_s"] - r["decode_s"]:.1f} | {r["model_s"]:.1f} |')
        md.append('')
    md += [*_failed(rows, lambda r: f'{r["frames"]} frames x {r["size"]} px'), *_notes(notes)]
    md += ['## Protocol', '',
           f'- Frames: {protocol["sampling"]} inside each item\'s window; {protocol["resize"]}. Indices and timestamps '
           'of every item per frame count: `results.json` -> `frames`.',
           '- Prompt: the MVBench prompt (`Question: ... Options: (A) ... Answer with the option\'s letter from the '
           f'given choices directly.`); greedy decoding of {protocol["max_new_tokens"]} tokens, KV cache, left-padded '
           f'batches of {protocol["batch_size"]}; {protocol["device"]}.',
           '- Scoring (`zoo.tasks.answers.parse_choice`): an option\'s exact text (numbers included), else a letter '
           'that can only be a letter (alone, after "answer" / "option", in parentheses, leading with punctuation; '
           'never the article "a" or the pronoun "I" in prose), else a whole-number 0-based index, else the one '
           f'option whose text the answer contains; when none is read, a random option seeded by ({protocol["seed"]}, '
           'item id) is scored and counted as a fallback.',
           f'- Unreadable videos: {len(unreadable)} (left out of every count).'] + \
        ([f'- Items with a bad window (outside their clip; left out, counted per cell as `bad_window`): '
          f'{len(state.extras["bad_items"])}, listed in `results.json` -> `bad_items`.']
         if state.extras.get('bad_items') else []) + ['']
    md += _models_table(models, [_MODEL, ('timm-style name', _NAME[1]), _CHECKPOINT, _CLIP])
    return _finish(files, md, unreadable, 'videos')
