"""Time multimodal RoPE position ids and cos/sin tables for a ~32k-token video sequence, per scheme (CPU), against
one decoder layer at that length.

Layout: text 64, video T=64 x 16 x 32 merged tokens (32768 visual tokens, second_per_grid_t = 1.0), text 64.
Qwen2-style token sequence for every scheme except MRoPE-Interleave / MHRoPE, which get the Qwen3-VL sequence (the
video split into 64 frame blocks, each with 3 timestamp tokens); RoPE-DHR gets a tiled image instead (its scheme is
about tiles): text 64, an AnyRes grid of 16 x 8 tiles of 16 x 16 merged tokens plus the thumbnail (33024 visual
tokens), text 64. PyPE's ids are one layer's (each layer has its own; ``layer`` 0 and 8 are timed). Reports, on the
process clock (``time.process_time``), the median of ``--repeats`` runs of

* ``ids from input_ids``: :func:`get_position_ids` on ``(1, L)`` token ids (the HF drop-in path),
* ``ids from layout``: :func:`get_layout_position_ids` on the segments,
* ``cos/sin``: :func:`multimodal_rope_cos_sin` for head_dim 128 in float32,

and, once per run of the command, one decoder layer (:class:`zoo.models.vlm.decoder.DecoderBlock`, width 512, 4
query / 2 key-value heads of head_dim 128, SwiGLU 1408, causal SDPA, float32, no grad) on ``(1, 32898, 512)``. The
last column is ``(ids from input_ids + cos/sin) / layer`` (issue 22's target: at most 10 %). What PyPE's visual-frame
pattern and CoPE's contextual term cost is attention work inside the layer (per block of queries above 2048 tokens),
not ids: ``benchmarks/cope_overhead.py`` states CoPE's per length.

Usage: ``python benchmarks/multimodal_rope_ids.py [--repeats 5] [--threads 1] [--no-layer]`` (prints a markdown
table).

``--demo-table`` instead prints the ids every scheme assigns to one small image-plus-video layout (the tables of
``docs/multimodal_rope.md``).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any, Mapping, Sequence

import torch

from zoo.encodings import multimodal_rope as mm

LAYOUT = [
    {'type': 'text', 'len': 64},
    {'type': 'video', 't': 64, 'h': 16, 'w': 32, 'second_per_grid_t': 1.0},
    {'type': 'text', 'len': 64},
]

TILED_LAYOUT = [
    {'type': 'text', 'len': 64},
    {'type': 'image', 'h': 16, 'w': 16, 'tiles': [16, 8]},
    {'type': 'text', 'len': 64},
]

CASES = [  # (label, scheme, options); each scheme's own prompt style (Scheme.layout_style)
    ('rope1d', 'rope1d', {}),
    ('M-RoPE (Qwen2-VL)', 'mrope', {}),
    ('M-RoPE (Qwen2.5-VL, tps=2)', 'qwen2_5_vl', {}),
    ('MRoPE-Interleave (Qwen3-VL)', 'mrope_interleave', {}),
    ('MRoPE-Interleave, spatial_reset', 'mrope_interleave', {'spatial_reset': True}),
    ('VRoPE', 'vrope', {}),
    ('V2PE (stride 64)', 'v2pe', {'stride': 64}),
    ('VideoRoPE (delta 2)', 'videorope', {}),
    ('HoPE (gamma 1)', 'hope', {}),
    ('MHRoPE', 'mhrope', {}),
    ('PyPE (layer 0)', 'pype', {}),
    ('PyPE (layer 8, jump 1)', 'pype', {'layer': 8}),
    ('Vista-LLaMA', 'vista', {}),
    ('CoPE (ids of rope1d, no rotation)', 'cope', {}),
    ('CoPE + RoPE', 'cope_rope', {}),
    ('RoPE-DHR (tiled image)', 'rope_dhr', {}),
]

DEMO_LAYOUT = [
    {'type': 'text', 'len': 2},
    {'type': 'image', 't': 1, 'h': 2, 'w': 2},
    {'type': 'text', 'len': 1},
    {'type': 'video', 't': 3, 'h': 2, 'w': 2, 'second_per_grid_t': 1.0},
    {'type': 'text', 'len': 2},
]


def _fmt(col: torch.Tensor) -> str:
    return ','.join(f'{v:g}' if isinstance(v, float) else str(v) for v in col.tolist())


def demo_table(segments: Sequence[Mapping[str, Any]] = tuple(DEMO_LAYOUT)) -> str:
    """Markdown tables of the ids every scheme assigns to one image-plus-video layout.

    Table 1 uses the Qwen2-VL token sequence (rope1d, M-RoPE Qwen2-VL, M-RoPE Qwen2.5-VL with
    ``tokens_per_second=2``, VRoPE, V2PE with stride 64, VideoRoPE with delta 2, HoPE with gamma 0.75). Table 2 uses
    the Qwen3-VL sequence (video split into frames with timestamp text) for MRoPE-Interleave (MHRoPE has the same
    ids) with and without ``spatial_reset``.
    """
    segments = list(segments)
    types = mm.layout_to_inputs(segments, style='qwen2')['token_types']
    cols = [('rope1d', 'rope1d', {}), ('M-RoPE (Qwen2-VL) t,h,w', 'mrope', {}),
            ('M-RoPE (Qwen2.5-VL, tps=2) t,h,w', 'qwen2_5_vl', {}), ('VRoPE p1..p4', 'vrope', {}),
            ('V2PE (stride 64)', 'v2pe', {}), ('VideoRoPE (delta 2) t,h,w', 'videorope', {}),
            ('HoPE (gamma 0.75) t,h,w', 'hope', {'gamma': 0.75})]
    ids = [mm.get_layout_position_ids(s, segments, style='qwen2', **kw)[0][:, 0] for _, s, kw in cols]
    lines = ['Qwen2-VL token sequence (V2PE: delta = 64/256 = 0.25 per visual token):', '',
             '| # | token | ' + ' | '.join(c[0] for c in cols) + ' |', '|' + '---|' * (2 + len(cols))]
    for i, typ in enumerate(types):
        lines.append(f'| {i} | {typ} | ' + ' | '.join(_fmt(p[:, i]) for p in ids) + ' |')
    types3 = mm.layout_to_inputs(segments, style='qwen3', timestamp_tokens_per_frame=1)['token_types']
    ids3 = [mm.get_layout_position_ids('mrope_interleave', segments, timestamp_tokens_per_frame=1,
                                       spatial_reset=sr)[0][:, 0] for sr in (False, True)]
    lines += ['', 'MRoPE-Interleave (and MHRoPE) on the Qwen3-VL sequence of the same layout (video split into frames, '
              '1 timestamp token per frame):', '',
              '| # | token | MRoPE-I t,h,w | MRoPE-I spatial_reset t,h,w |', '|---|---|---|---|']
    for i, typ in enumerate(types3):
        lines.append(f'| {i} | {typ} | {_fmt(ids3[0][:, i])} | {_fmt(ids3[1][:, i])} |')
    return '\n'.join(lines)


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append((time.process_time() - t0) * 1e3)
    return statistics.median(times)


def layer_ms(length: int) -> float:
    """Process-clock ms of one decoder layer's forward on ``(1, length, 512)`` (head_dim 128, causal, no grad)."""
    from zoo.models.vlm.decoder import DecoderBlock
    torch.manual_seed(0)
    blk = DecoderBlock(512, 4, 2, 128, 1408).eval()
    with torch.no_grad():
        blk(torch.randn(1, 2048, 512))  # warm-up at a short length
        x = torch.randn(1, length, 512)
        t0 = time.process_time()
        blk(x)
        return (time.process_time() - t0) * 1e3


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--threads', type=int, default=1, help='torch intra-op threads (default 1)')
    parser.add_argument('--no-layer', action='store_true', help='skip the decoder-layer reference (~1 CPU-minute)')
    parser.add_argument('--demo-table', action='store_true', help='print the per-scheme id table (markdown) and exit')
    args = parser.parse_args(argv)
    if args.demo_table:
        print('Layout: ' + ', '.join(
            f"text {s['len']}" if s['type'] == 'text' else f"{s['type']} {s['t']}x{s['h']}x{s['w']}"
            for s in DEMO_LAYOUT) + ' (merged grids; markers are text)\n')
        print(demo_table())
        return
    torch.set_num_threads(args.threads)
    rows = []
    for label, scheme, kw in CASES:
        spec = mm.get_scheme(scheme)
        layout = TILED_LAYOUT if spec.takes_tiles else LAYOUT
        style = spec.layout_style(layout)
        inp = mm.layout_to_inputs(layout, style=style)
        extra = {'second_per_grid_ts': inp['second_per_grid_ts']} if spec.uses_seconds(kw) else {}
        if spec.takes_tiles:
            extra['image_tiles'] = torch.tensor([seg['tiles'] for seg in layout if 'tiles' in seg])
        ids = inp['input_ids']

        def from_ids():
            return mm.get_position_ids(scheme, ids, inp['image_grid_thw'], inp['video_grid_thw'], **extra, **kw)

        def from_layout():
            return mm.get_layout_position_ids(scheme, layout, style=style, **kw)

        pos, _ = from_ids()
        assert torch.equal(pos, from_layout()[0].to(pos.dtype)), label

        table = {'num_kv_heads': 8} if scheme == 'mhrope' else {}  # MHRoPE splits the key heads: 8 as published

        def cos_sin():
            return mm.multimodal_rope_cos_sin(pos, 128, scheme, **table)

        rows.append((label, ids.shape[1], _median_ms(from_ids, args.repeats), _median_ms(from_layout, args.repeats),
                     _median_ms(cos_sin, args.repeats)))
    layer = None if args.no_layer else layer_ms(max(r[1] for r in rows if not r[0].startswith('RoPE-DHR')))
    print(f'CPU: {platform.processor() or platform.machine()}, torch {torch.__version__}, '
          f'{torch.get_num_threads()} threads; process clock; median of {args.repeats} runs; load average '
          + ' / '.join(f'{v:.1f}' for v in os.getloadavg()) + '\n')
    if layer is not None:
        print(f'One decoder layer (width 512, 4 / 2 heads of 128, causal SDPA) at 32898 tokens: {layer:.0f} ms\n')
    print('| scheme | tokens | ids from input_ids (ms) | ids from layout (ms) | cos/sin head_dim 128 (ms) | '
          '(ids + cos/sin) / layer |')
    print('|---|---|---|---|---|---|')
    for label, n, a, b, c in rows:
        share = '-' if layer is None else f'{100 * (a + c) / layer:.2f} %'
        print(f'| {label} | {n} | {a:.1f} | {b:.1f} | {c:.1f} | {share} |')


if __name__ == '__main__':
    main()
