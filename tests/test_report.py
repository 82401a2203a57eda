"""Readable resolution reports: series styles, relative accuracy, heatmap, replot from saved results."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from zoo.sweep.report import (encoding_family, relative_table, relative_to_train, replot, rows_from_markdown,
                             series_styles, write_report)

LABELS = ['ape (seed 0)', 'ape (seed 1)', 'rope_mixed (seed 0)', 'rope_mixed (seed 1)', 'rope_axial', 'rope_mixed_ape',
          'comrope_ap', 'comrope_ld', 'liere', 'sincos', 'fourier', 'nope', 'peg', 'irpe_k', 'irpe_qkv']


def _df():
    rows = []
    for i, label in enumerate(LABELS):
        pe = label.split(' ')[0]
        for size in (24, 32, 48):
            top1 = 40.0 + i + (size == 32) * 5 - size / 100
            rows.append(dict(label=label, pe=pe, train_size=32, size=size, top1=top1, top5=90.0, images_per_s=100.0,
                             n=50, error=''))
    return pd.DataFrame(rows)


def test_series_styles_family_colour_variant_linestyle_unique_marker():
    styles = series_styles(_df())
    assert len({(s['color'], s['ls'], s['marker']) for s in styles.values()}) == len(LABELS)
    assert len({s['marker'] for s in styles.values()}) == len(LABELS)  # no two series share a marker
    fam = {label: encoding_family(dict(label=label, pe=label.split(' ')[0])) for label in LABELS}
    assert fam['rope_axial'] == fam['rope_mixed_ape'] == 'rope' and fam['comrope_ld'] == 'comrope'
    for a in LABELS:
        for b in LABELS:
            same_colour = styles[a]['color'] == styles[b]['color']
            assert same_colour == (fam[a] == fam[b]), (a, b)
            if a != b and fam[a] == fam[b]:
                assert styles[a]['ls'] != styles[b]['ls']  # variants / seeds of one family: other line style


def test_relative_to_train_and_table():
    df = _df()
    rel = relative_to_train(df)
    assert rel[(df['size'] == 32)].abs().max() == 0
    assert rel[(df['label'] == 'nope') & (df['size'] == 48)].iloc[0] == pytest.approx(-5.16)
    assert '| nope | -4.9 | ◦ | -5.2 |' in relative_table(df)


def test_write_report_has_heatmap_and_relative_section(tmp_path):
    df = _df()
    protocol = dict(data_root='data/x/test', num_classes=10, crop_pct=1.0, interpolation='bicubic', batch_size=8,
                    device='cpu', amp=False, unreadable=[], max_per_class=None)
    models = [dict(label=label, model='m', checkpoint='c', family='f', adaptation='a', train_size=32)
              for label in LABELS]
    paths = write_report(df.to_dict('records'), models, protocol, str(tmp_path))
    assert os.path.getsize(paths['heatmap']) > 10_000 and os.path.getsize(paths['png']) > 10_000
    md = open(paths['md']).read()
    assert '![top-1 heatmap, model x size](heatmap.png)' in md and 'relative to each model' in md


def test_replot_from_markdown_table_and_csv(tmp_path):
    md = tmp_path / 'page.md'
    md.write_text('# t\n\n| model | trained at | 24 px | 32 px | full test @ train size |\n'
                  '|---|---|---|---|---|\n'
                  '| ape (seed 0) | 32 px | **45.94** | 49.16 ◦ | 48.46 |\n'
                  '| rope_mixed | 32 px | 43.14 | n/a | 1 |\n\n')
    rows = rows_from_markdown(str(md))
    assert rows[0] == dict(label='ape (seed 0)', pe='ape', train_size=32, size=24, top1=45.94)
    assert len(rows) == 4 and pd.isna(rows[3]['top1'])
    out = replot([str(md), '--png', str(tmp_path / 'a.png'), '--heatmap', str(tmp_path / 'h.png'),
                  '--csv', str(tmp_path / 'r.csv')])
    assert all(os.path.getsize(p) > 0 for p in out.values())
    again = replot([str(tmp_path / 'r.csv'), '--png', str(tmp_path / 'b.png')])
    assert os.path.getsize(again['png']) > 0
    (tmp_path / 'empty.md').write_text('no table\n')
    with pytest.raises(ValueError, match='no "| model | trained at'):
        rows_from_markdown(str(tmp_path / 'empty.md'))


def test_replot_missing_file_and_other_sweeps(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, '-m', 'zoo.sweep.report', str(tmp_path / 'none.csv'), '--png',
                           str(tmp_path / 'a.png')], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count('\n') == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert "none.csv' does not exist" in proc.stderr
    video = pd.DataFrame([dict(label=lab, model='pe_vlm_tiny_mrope', frames=t, size=32, train_size=32, train_frames=4,
                               acc=40.0 + t, chance=25.0, n=8, error='') for lab in ('mrope', 'vrope')
                          for t in (2, 4, 8)])
    video.to_csv(tmp_path / 'video.csv', index=False)
    assert replot([str(tmp_path / 'video.csv'), '--png', str(tmp_path / 'v.png')]) == dict(png=str(tmp_path / 'v.png'))
    assert os.path.getsize(tmp_path / 'v.png') > 1000
    frames = pd.DataFrame([dict(label='rope3d', pe='rope3d', frames=t, size=s, train_frames=4, train_size=32,
                                top1=50.0 + t + s / 8, error='') for t in (2, 4, 8) for s in (24, 32)])
    frames.to_csv(tmp_path / 'frames.csv', index=False)
    out = replot([str(tmp_path / 'frames.csv'), '--png', str(tmp_path / 'f.png'), '--heatmap', str(tmp_path / 'h.png')])
    assert set(out) == {'png', 'heatmap'} and os.path.getsize(tmp_path / 'h.png') > 1000
    (tmp_path / 'bad.json').write_text('{"results": [')
    with pytest.raises(ValueError, match="bad.json' is not readable sweep results"):
        replot([str(tmp_path / 'bad.json'), '--png', str(tmp_path / 'b.png')])
    with pytest.raises(ValueError, match='eval-video rows, which have no heatmap'):
        replot([str(tmp_path / 'video.csv'), '--png', str(tmp_path / 'v.png'), '--heatmap', str(tmp_path / 'x.png')])
