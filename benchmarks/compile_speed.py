"""Eager vs ``torch.compile`` (inductor) inference time of every 2D PE in the same ViT, as ratios in one run.

Usage::

    python benchmarks/compile_speed.py --out docs/benchmarks/compile_speed.md
    python benchmarks/compile_speed.py --pes rope_mixed comrope_ap --size 224 --batch-size 8

Protocol: ``pe_vit_{--model-size}_patch16_{pe}_224`` at ``--size`` px, batch ``--batch-size``, eval mode under
``torch.inference_mode``. Each PE's compiled model (``torch.compile(model)``, default inductor backend) is warmed up
(compilation excluded), then the eager and compiled models are timed alternately (one batch each per round, so
background load hits both alike); the table gives medians and ``compiled / eager``. A ratio above 1 means compiling
made that encoding slower.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import timm
import torch

import zoo  # noqa: F401

DEFAULT_PES = ['ape', 'sincos', 'nope', 'peg', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape',
               'irpe_k', 'irpe_qkv', 'comrope_ap', 'comrope_ld', 'liere']


def measure(pe: str, args: argparse.Namespace) -> dict:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = timm.create_model(f'pe_vit_{args.model_size}_patch16_{pe}_224', img_size=args.size).eval()
    compiled = torch.compile(model)
    x = torch.randn(args.batch_size, 3, args.size, args.size)
    with torch.inference_mode():
        t0 = time.perf_counter()
        compiled(x)
        compile_s = time.perf_counter() - t0
        for _ in range(args.warmup):
            model(x)
            compiled(x)
        times = {'eager': [], 'compiled': []}
        for _ in range(args.repeats):
            for key, fn in (('eager', model), ('compiled', compiled)):
                t0 = time.perf_counter()
                fn(x)
                times[key].append(time.perf_counter() - t0)
        err = (compiled(x) - model(x)).abs().max().item()
    eager, comp = statistics.median(times['eager']), statistics.median(times['compiled'])
    return dict(pe=pe, eager_ms=1e3 * eager, compiled_ms=1e3 * comp, ratio=comp / eager, compile_s=compile_s,
                max_abs_diff=err)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=DEFAULT_PES)
    parser.add_argument('--model-size', default='small', choices=['tiny', 'small', 'base'])
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--threads', type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument('--out', help='write the markdown table here (and a .json beside it)')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for pe in args.pes:
        rows.append(measure(pe, args))
        print(f'{pe}: {rows[-1]}', file=sys.stderr)
    cpu = platform.processor() or platform.machine()
    lines = [f'CPU ({os.cpu_count()} cores, {args.threads} threads, {cpu}), torch {torch.__version__}, '
             f'timm {timm.__version__}, ViT-{args.model_size[0].upper()}/16 at {args.size} px, batch '
             f'{args.batch_size}, median of {args.repeats} alternating rounds.', '',
             '| pe | eager ms | compiled ms | compiled / eager | compile s | max abs diff |', '|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f'| `{r["pe"]}` | {r["eager_ms"]:.0f} | {r["compiled_ms"]:.0f} | {r["ratio"]:.2f} | '
                     f'{r["compile_s"]:.0f} | {r["max_abs_diff"]:.1e} |')
    table = '\n'.join(lines)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            f.write(f'Command: `python benchmarks/compile_speed.py {" ".join(sys.argv[1:] if argv is None else argv)}`'
                    f'\n\n{table}\n')
        with open(os.path.splitext(args.out)[0] + '.json', 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
