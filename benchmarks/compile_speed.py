"""Eager vs ``torch.compile`` (inductor) inference time of every registered encoding in the same ViT, as ratios.

Usage::

    python benchmarks/compile_speed.py --out docs/benchmarks/compile.md          # the whole registry, ViT-Ti, batch 4
    python benchmarks/compile_speed.py --pes rope_mixed comrope:variant=ld liere

Protocol: a ``PEVisionTransformer`` of ``--model-size`` geometry (ViT-Ti by default) at ``--size`` px, batch
``--batch-size`` (4), eval mode under ``torch.inference_mode``, for every registered encoding at its defaults plus the
options that take other code paths (``kind:key=value``). Each compiled model (``torch.compile(model)``, default
inductor backend) is warmed up (compilation excluded), then the eager and compiled models are timed alternately (one
batch each per round, so background load hits both alike) on the process clock (``time.process_time``) with one
thread by default; the table gives medians and ``compiled / eager``. A ratio above 1 means compiling made that
encoding slower.
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
from zoo.encodings import list_pos_encodings
from zoo.models.vit import PEVisionTransformer

#: every registered encoding at its defaults, then options that take other code paths (``kind:key=value``)
DEFAULT_PES = list_pos_encodings() + ['comrope:variant=ld', 'irpe:rpe_on=qkv']
GEOMETRY = {'tiny': dict(embed_dim=192, depth=12, num_heads=3), 'small': dict(embed_dim=384, depth=12, num_heads=6),
            'base': dict(embed_dim=768, depth=12, num_heads=12)}


def build(spec: str, args: argparse.Namespace) -> PEVisionTransformer:
    """``kind`` or ``kind:key=value[,key=value]`` (values parsed as Python literals, else strings)."""
    import ast
    kind, _, opts = spec.partition(':')
    kw = {}
    for item in filter(None, opts.split(',')):
        k, _, v = item.partition('=')
        try:
            kw[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            kw[k] = v
    return PEVisionTransformer(img_size=args.size, patch_size=16, num_classes=1000, pe=kind, pe_kwargs=kw,
                               **GEOMETRY[args.model_size])


def measure(pe: str, args: argparse.Namespace) -> dict:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build(pe, args).eval()
    compiled = torch.compile(model)
    x = torch.randn(args.batch_size, 3, args.size, args.size)
    clock = time.process_time if args.clock == 'cpu' else time.perf_counter
    with torch.inference_mode():
        t0 = clock()
        compiled(x)
        compile_s = clock() - t0
        for _ in range(args.warmup):
            model(x)
            compiled(x)
        times = {'eager': [], 'compiled': []}
        for _ in range(args.repeats):
            for key, fn in (('eager', model), ('compiled', compiled)):
                t0 = clock()
                fn(x)
                times[key].append(clock() - t0)
        err = (compiled(x) - model(x)).abs().max().item()
    eager, comp = statistics.median(times['eager']), statistics.median(times['compiled'])
    return dict(pe=pe, eager_ms=1e3 * eager, compiled_ms=1e3 * comp, ratio=comp / eager, compile_s=compile_s,
                max_abs_diff=err)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=DEFAULT_PES)
    parser.add_argument('--model-size', default='tiny', choices=sorted(GEOMETRY))
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=4)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--clock', choices=['cpu', 'wall'], default='cpu',
                        help='cpu = time.process_time (robust to other jobs; with one thread the compute time)')
    parser.add_argument('--out', help='write the markdown table here (and a .json beside it)')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for pe in args.pes:
        try:
            rows.append(measure(pe, args))
        except Exception as err:  # noqa: BLE001  (the table names the failure)
            rows.append(dict(pe=pe, error=f'{type(err).__name__}: {str(err).splitlines()[0][:100]}'))
        print(f'{pe}: {rows[-1]}', file=sys.stderr)
    cpu = platform.processor() or platform.machine()
    lines = [f'CPU ({os.cpu_count()} cores, {args.threads} threads, {cpu}), torch {torch.__version__}, '
             f'timm {timm.__version__}, ViT-{args.model_size[0].upper()}/16 at {args.size} px, batch '
             f'{args.batch_size}, {args.clock} clock, median of {args.repeats} alternating rounds.', '',
             '| pe | eager ms | compiled ms | compiled / eager | compile s | max abs diff |', '|---|---|---|---|---|---|']
    for r in rows:
        if 'error' in r:
            lines.append(f'| `{r["pe"]}` | failed: {r["error"]} | | | | |')
            continue
        lines.append(f'| `{r["pe"]}` | {r["eager_ms"]:.0f} | {r["compiled_ms"]:.0f} | {r["ratio"]:.2f} | '
                     f'{r["compile_s"]:.0f} | {r["max_abs_diff"]:.1e} |')
    table = '\n'.join(lines)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + '.tmp', 'w') as f:
            f.write(f'Command: `python benchmarks/compile_speed.py {" ".join(sys.argv[1:] if argv is None else argv)}`'
                    f'\n\n{table}\n')
        os.replace(args.out + '.tmp', args.out)
        with open(os.path.splitext(args.out)[0] + '.json.tmp', 'w') as f:
            json.dump(rows, f, indent=1)
        os.replace(os.path.splitext(args.out)[0] + '.json.tmp', os.path.splitext(args.out)[0] + '.json')


if __name__ == '__main__':
    main()
