"""Time CoPE's overhead over 1-D RoPE in one video-LLM decoder layer, per sequence length (CPU, forward, no grad).

One ``DecoderBlock`` of the tiny video-LLM geometry (width 256, 8 query / 2 key heads, head_dim 32, SwiGLU 704) runs
on ``(1, L, 256)`` inputs with causal attention. Its attention term comes from the decoder encoding:
* ``rope1d``: rotation only (SDPA's causal fast path);
* ``cope_rope``: rotation plus CoPE's bias (gates, positions and q.E interpolation over an ``(L, L)`` block per head,
  merged into SDPA as an additive mask);
* ``cope``: CoPE without rotation.

The ids and tables are built inside the timed call, as in a forward. Reports the median of ``--repeats`` runs.

Usage: ``python benchmarks/cope_overhead.py [--lengths 256 1024 2048] [--repeats 5] [--threads 1] [--npos 64]``
(prints a markdown table).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from zoo.encodings import Positions
from zoo.models.vlm.decoder import Decoder

SCHEMES = ('rope1d', 'cope_rope', 'cope')


def _layer_time(scheme: str, length: int, repeats: int, npos: int) -> float:
    torch.manual_seed(0)
    opts = dict(npos=npos) if scheme != 'rope1d' else None
    dec = Decoder(64, 256, 1, 8, 2, mlp_hidden=704, scheme=scheme, scheme_options=opts).eval()
    x = torch.randn(1, length, 256)
    ids = torch.arange(length)[None, None]
    blk = dec.blocks[0]

    def run():
        term = dec.pe.attn_terms(Positions(None, ids=ids, is_causal=True), x.dtype, x.device)[0]
        return blk(x, term)

    times = []
    with torch.no_grad():
        run()  # warm-up
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--lengths', type=int, nargs='+', default=[256, 1024, 2048])
    p.add_argument('--repeats', type=int, default=5)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--npos', type=int, default=64)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f'CPU: {platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s), '
          f'median of {args.repeats}, npos {args.npos}\n')
    print('| tokens L | rope1d layer (ms) | cope_rope layer (ms) | overhead | cope layer (ms) | overhead |')
    print('|---|---|---|---|---|---|')
    for n in args.lengths:
        t = {s: _layer_time(s, n, args.repeats, args.npos) for s in SCHEMES}
        base = t['rope1d']
        print(f'| {n} | {1e3 * base:.1f} | {1e3 * t["cope_rope"]:.1f} | {t["cope_rope"] / base:.2f}x | '
              f'{1e3 * t["cope"]:.1f} | {t["cope"] / base:.2f}x |')


if __name__ == '__main__':
    main()
