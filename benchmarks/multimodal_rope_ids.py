"""Time multimodal RoPE position ids and cos/sin tables for a ~32k-token video sequence, per scheme (CPU).

Layout: text 64, video T=64 x 16 x 32 merged tokens (32768 visual tokens, second_per_grid_t = 1.0), text 64.
Qwen2-style token sequence for every scheme except MRoPE-Interleave, which gets the Qwen3-VL sequence (the video
split into 64 frame blocks, each with 3 timestamp tokens). Reports the median of ``--repeats`` runs of

* ``ids from input_ids``: :func:`get_position_ids` on ``(1, L)`` token ids (the HF drop-in path),
* ``ids from layout``: :func:`get_layout_position_ids` on the segments,
* ``cos/sin``: :func:`multimodal_rope_cos_sin` for head_dim 128 in float32.

Usage: ``python benchmarks/multimodal_rope_ids.py [--repeats 5] [--threads 1]`` (prints a markdown table).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from zoo.encodings import multimodal_rope as mm

LAYOUT = [
    {'type': 'text', 'len': 64},
    {'type': 'video', 't': 64, 'h': 16, 'w': 32, 'second_per_grid_t': 1.0},
    {'type': 'text', 'len': 64},
]

CASES = [
    ('rope1d', 'rope1d', {}, 'qwen2'),
    ('M-RoPE (Qwen2-VL)', 'mrope', {}, 'qwen2'),
    ('M-RoPE (Qwen2.5-VL, tps=2)', 'qwen2_5_vl', {}, 'qwen2'),
    ('MRoPE-Interleave (Qwen3-VL)', 'mrope_interleave', {}, 'qwen3'),
    ('MRoPE-Interleave, spatial_reset', 'mrope_interleave', {'spatial_reset': True}, 'qwen3'),
    ('VRoPE', 'vrope', {}, 'qwen2'),
    ('V2PE (stride 64)', 'v2pe', {'stride': 64}, 'qwen2'),
]


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--threads', type=int, default=1, help='torch intra-op threads (default 1)')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for label, scheme, kw, style in CASES:
        inp = mm.layout_to_inputs(LAYOUT, style=style)
        extra = {'second_per_grid_ts': inp['second_per_grid_ts']} if scheme == 'qwen2_5_vl' else {}
        ids = inp['input_ids']

        def from_ids():
            return mm.get_position_ids(scheme, ids, inp['image_grid_thw'], inp['video_grid_thw'], **extra, **kw)

        def from_layout():
            return mm.get_layout_position_ids(scheme, LAYOUT, style=style, **kw)

        pos, _ = from_ids()

        def cos_sin():
            return mm.multimodal_rope_cos_sin(pos, 128, scheme)

        rows.append((label, ids.shape[1], _median_ms(from_ids, args.repeats), _median_ms(from_layout, args.repeats),
                     _median_ms(cos_sin, args.repeats)))
    print(f'CPU: {platform.processor() or platform.machine()}, torch {torch.__version__}, '
          f'{torch.get_num_threads()} threads; median of {args.repeats} runs\n')
    print('| scheme | tokens | ids from input_ids (ms) | ids from layout (ms) | cos/sin head_dim 128 (ms) |')
    print('|---|---|---|---|---|')
    for label, n, a, b, c in rows:
        print(f'| {label} | {n} | {a:.1f} | {b:.1f} | {c:.1f} |')


if __name__ == '__main__':
    main()
