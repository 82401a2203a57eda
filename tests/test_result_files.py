"""Result files any reader can parse (issue 20, item 7).

Regressions: ``results.json`` held ``NaN`` (not JSON to strict parsers such as JavaScript's ``JSON.parse``), and
eval-frames' ``report.md`` broke its own tables with an unescaped ``|`` in a position encoding's description (iRPE's
"saturates at |offset| >= 4").
"""
import json
import math
import os

import pandas as pd

from zoo.runs.checkpoints import write_results_file
from zoo.sweep.report import frames_page, read_result_set, rows_from_markdown, write_frames_report, write_report
from zoo.sweep.report.tables import cell, split_row


def strict_load(path):
    """JSON as a strict parser reads it: ``NaN`` / ``Infinity`` are errors."""
    def refuse(token):
        raise ValueError(f'{path}: {token} is not JSON')
    with open(path) as f:
        return json.load(f, parse_constant=refuse)


IRPE = 'bucket ids recomputed for the new (T, H, W) grid (product 1.9 saturates at |offset| >= 4); APE resampled'
MODELS = [dict(label='irpe|k', model='pe_video_vit_tiny_patch16_irpe_k_224', checkpoint='a.pth', family='irpe',
               adaptation=IRPE, train_frames=8, train_size=32, extrapolation_desc='')]


def _frame_rows():
    rows = []
    for t in (4, 8):
        for s in (32, 48):
            failed = (t, s) == (8, 48)
            rows.append(dict(label='irpe|k', frames=t, size=s, train_frames=8, train_size=32, n=0 if failed else 10,
                             top1=math.nan if failed else 50.0 + t, top5=math.nan if failed else 90.0,
                             clips_per_s=math.inf if failed else 12.5, error='MemoryError: out' if failed else '',
                             checkpoint=None if failed else 'a.pth'))
    return rows


def test_results_json_is_strict_and_reads_back_as_nan(tmp_path):
    rows = _frame_rows()
    protocol = dict(data_root=str(tmp_path), num_classes=2, batch_size=4, device='cpu', weights='raw',
                    sampling='uniform', nan_field=math.nan)
    paths = write_frames_report(rows, MODELS, protocol, str(tmp_path))
    data = strict_load(paths['json'])
    failed = [r for r in data['results'] if r['error']]
    assert failed[0]['top1'] is None and failed[0]['clips_per_s'] is None and data['protocol']['nan_field'] is None
    back = read_result_set(str(tmp_path))['results']
    assert math.isnan(back[3]['top1']) and math.isnan(back[3]['clips_per_s']) and back[0]['top1'] == 54.0
    assert back[3]['checkpoint'] is None and back[3]['error'] == 'MemoryError: out'  # None in other columns stays
    csv = pd.read_csv(paths['csv'])
    assert csv['top1'].isna().sum() == 1


def test_results_file_json_is_strict(tmp_path):
    write_results_file(str(tmp_path / 'r.json'), _frame_rows())
    assert strict_load(tmp_path / 'r.json')[3]['top1'] is None


def _table_rows(md):
    """Each markdown table's rows as cell lists (escaped pipes kept inside their cells)."""
    tables, cur = [], []
    for line in md.splitlines():
        if line.startswith('|'):
            cur.append(split_row(line))
        elif cur:
            tables.append(cur)
            cur = []
    return tables + ([cur] if cur else [])


def test_report_tables_keep_their_columns_with_pipes_in_cells(tmp_path):
    files = frames_page(type('S', (), dict(rows=_frame_rows(), total=4, extras={}))(), MODELS,
                        dict(data_root=str(tmp_path), num_classes=2, batch_size=4, device='cpu', weights='raw',
                             sampling='uniform'), notes=[])
    tables = _table_rows(files['report.md'])
    assert tables
    for table in tables:
        assert len({len(r) for r in table}) == 1, table  # every row as many cells as the heading
    assert any(IRPE in row for table in tables for row in table)
    assert any('irpe|k' in row for table in tables for row in table)


def test_markdown_tables_read_back_with_escaped_pipes(tmp_path):
    rows = [dict(label=label, pe='ape', train_size=32, size=s, top1=60.0 + s / 10, top5=90.0, images_per_s=1.0, n=5,
                 error='') for label in ('a|b', 'ape') for s in (24, 32)]
    models = [dict(label=label, model='m', checkpoint='c', family='ape', adaptation='x', train_size=32)
              for label in ('a|b', 'ape')]
    paths = write_report(rows, models, dict(data_root='d', num_classes=2, interpolation='bicubic', crop_pct=1.0,
                                            batch_size=4, device='cpu'), str(tmp_path))
    back = rows_from_markdown(paths['md'])
    assert {r['label'] for r in back} == {'a|b', 'ape'} and len(back) == 4
    assert cell('x | y\nz') == 'x \\| y z' and split_row('| a \\| b | c |') == ['a | b', 'c']
    assert os.path.isfile(paths['json'])
