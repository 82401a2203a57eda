"""CPU throughput of every 2D PE in the same ViT-S backbone, as ratios to timm baselines timed in the same run.

Usage::

    python benchmarks/throughput.py                       # all PEs, 224 and 384, inference + training step
    python benchmarks/throughput.py --pes ape rope_mixed --sizes 224 --no-train --repeats 5
    python benchmarks/throughput.py --train-only --pes ape rope_mixed irpe_k comrope_ap

Protocol: batch 8 (``--batch-size``), ``torch.inference_mode`` for inference; a training step is forward, cross-entropy,
backward and an SGD step. Models are timed round-robin (one batch of each model per round, ``--repeats`` rounds after
``--warmup`` rounds), so background load hits all models alike; the table gives medians. Ratios are time / time of the
reference model of the same size and mode: timm's ``vit_small_patch16_224`` for inference (``ratio vs timm APE``) and
our ``rope_mixed`` (``ratio vs rope_mixed``). Peak memory (``--memory``) is the growth of the peak resident set size
(ru_maxrss) of a fresh process while it runs the timed loop of that one model, in MiB.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List

import timm
import torch
import torch.nn.functional as F

import zoo  # noqa: F401

TIMM_BASELINES = ['vit_small_patch16_224', 'vit_small_patch16_rope_224', 'vit_small_patch16_rope_mixed_224']
DEFAULT_PES = ['ape', 'sincos', 'nope', 'peg', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape',
               'irpe_k', 'irpe_qkv', 'comrope_ap', 'comrope_ld', 'liere']
TRAIN_PES = ['ape', 'rope_mixed', 'irpe_k', 'irpe_qkv', 'comrope_ap', 'comrope_ld', 'liere']


def model_name(key: str) -> str:
    return key if key.startswith('vit_') else f'pe_vit_small_patch16_{key}_224'


def build(key: str, size: int) -> torch.nn.Module:
    return timm.create_model(model_name(key), img_size=size, num_classes=1000)


def infer_step(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    model.eval()

    def step():
        with torch.inference_mode():
            model(x)
    return step


def train_step(model: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    target = torch.zeros(x.shape[0], dtype=torch.long)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), target).backward()
        opt.step()
    return step


def time_round_robin(steps: Dict[str, Callable[[], None]], warmup: int, repeats: int) -> Dict[str, float]:
    """Median seconds per call of each step, timed one call per model per round."""
    times = {k: [] for k in steps}
    for r in range(warmup + repeats):
        for key, step in steps.items():
            t0 = time.perf_counter()
            step()
            if r >= warmup:
                times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def peak_memory_mib(key: str, size: int, batch_size: int, mode: str) -> float:
    """Run one model's loop in a fresh process and return the growth of its peak RSS (MiB)."""
    code = (
        'import resource, sys, torch; sys.path.insert(0, "benchmarks"); import throughput as t\n'
        f'torch.set_num_threads({torch.get_num_threads()})\n'
        f'm = t.build({key!r}, {size}); x = torch.randn({batch_size}, 3, {size}, {size})\n'
        f'step = (t.infer_step if {mode!r} == "infer" else t.train_step)(m, x)\n'
        'before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n'
        'step(); step()\n'
        'print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return float(out.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> List[Dict]:
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rows = []
    modes = ([] if args.train_only else ['infer']) + ([] if args.no_train else ['train'])
    for mode in modes:
        keys = TIMM_BASELINES + (args.pes if mode == 'infer' else [p for p in args.pes if p in TRAIN_PES])
        for size in args.sizes:
            x = torch.randn(args.batch_size, 3, size, size)
            steps = {}
            for key in keys:
                try:
                    steps[key] = (infer_step if mode == 'infer' else train_step)(build(key, size), x)
                except (RuntimeError, ValueError) as err:  # an encoding that is not available in this checkout
                    print(f'skipping {key}: {err}', file=sys.stderr)
            med = time_round_robin(steps, args.warmup, args.repeats)
            for key, sec in med.items():
                row = dict(mode=mode, size=size, model=model_name(key), pe=key, ms=1e3 * sec,
                           img_per_s=args.batch_size / sec,
                           vs_timm_ape=sec / med['vit_small_patch16_224'],
                           vs_timm_rope=sec / med['vit_small_patch16_rope_224'],
                           vs_timm_rope_mixed=sec / med['vit_small_patch16_rope_mixed_224'],
                           vs_rope_mixed=sec / med['rope_mixed'] if 'rope_mixed' in med else float('nan'),
                           vs_ape=sec / med['ape'] if 'ape' in med else float('nan'))
                if args.memory:
                    row['peak_mib'] = peak_memory_mib(key, size, args.batch_size, mode)
                rows.append(row)
                del steps[key]
            print(f'done: {mode} at {size}', file=sys.stderr)
    return rows


def to_markdown(rows: List[Dict], args: argparse.Namespace) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [f'CPU ({os.cpu_count()} cores, {args.threads} threads, {cpu}), torch {torch.__version__}, '
             f'timm {timm.__version__}, batch {args.batch_size}, median of {args.repeats} round-robin rounds.', '']
    mem = ' peak MiB |' if args.memory else ''
    lines.append(f'| mode | size | model | ms/batch | img/s | vs timm APE | vs timm RoPE | vs timm RoPE-Mixed | '
                 f'vs our ape | vs our rope_mixed |{mem}')
    lines.append('|---|---|---|---|---|---|---|---|---|---|' + ('---|' if args.memory else ''))
    for r in rows:
        mem = f' {r["peak_mib"]:.0f} |' if args.memory else ''
        lines.append(f'| {r["mode"]} | {r["size"]} | `{r["pe"]}` | {r["ms"]:.0f} | {r["img_per_s"]:.1f} | '
                     f'{r["vs_timm_ape"]:.2f} | {r["vs_timm_rope"]:.2f} | {r["vs_timm_rope_mixed"]:.2f} | '
                     f'{r["vs_ape"]:.2f} | {r["vs_rope_mixed"]:.2f} |{mem}')
    return '\n'.join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=DEFAULT_PES, help='PE suffixes of pe_vit_small_patch16_*_224')
    parser.add_argument('--sizes', nargs='+', type=int, default=[224, 384])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--repeats', type=int, default=7)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--threads', type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument('--no-train', action='store_true', help='skip the training-step timing')
    parser.add_argument('--train-only', action='store_true', help='skip the inference timing')
    parser.add_argument('--memory', action='store_true', help='also measure peak memory (one process per model)')
    parser.add_argument('--out', help='write the markdown table here (and a .json beside it)')
    args = parser.parse_args(argv)
    rows = run(args)
    table = to_markdown(rows, args)
    print(table)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            f.write(f'Command: `python benchmarks/throughput.py {" ".join(sys.argv[1:] if argv is None else argv)}`\n\n')
            f.write(table + '\n')
        with open(os.path.splitext(args.out)[0] + '.json', 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
