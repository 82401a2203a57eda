"""Where RoPE's time goes in a ViT-S forward: torch.profiler self CPU time per operator, grouped, for timm's APE ViT-S,
our APE and our RoPE ViTs, with the rotation kernel of the zoo (eager CPU: one complex multiply per tensor) and with
timm's real kernel (``apply_rot_embed``: copy, slices, neg, stack, two multiplies, an add) forced.

Usage::

    python benchmarks/rope_profile.py --out docs/benchmarks/rope_profile.md
    python benchmarks/rope_profile.py --models vit_small_patch16_224 rope_mixed --forwards 5 --batch-size 8

One thread, inference mode, batch 8 at 224 px by default; each model is profiled ``--forwards`` times round-robin
after a warm-up forward (which builds the cached tables), and the table gives the median self CPU time per forward.
The profiler's times are wall times of each operator, so a loaded machine inflates them all; compare columns.
"""
from __future__ import annotations

import argparse
import collections
import os
import platform
import statistics
import sys
import time
from typing import Dict, List

import timm
import torch
from torch.profiler import ProfilerActivity, profile

import zoo  # noqa: F401
from zoo.encodings.rotary import RotaryTerm

# operator -> group in the table
GROUPS = {
    'aten::addmm': 'linear layers (addmm)', 'aten::mm': 'linear layers (addmm)',
    'aten::_scaled_dot_product_flash_attention_for_cpu': 'attention (SDPA)',
    'aten::mul': 'elementwise: mul', 'aten::add': 'elementwise: add', 'aten::neg': 'elementwise: neg',
    'aten::cat': 'cat / stack', 'aten::copy_': 'copies (contiguous, reshape)',
    'aten::clone': 'copies (contiguous, reshape)',
    'aten::gelu': 'GELU', 'aten::native_layer_norm': 'LayerNorm', 'aten::mkldnn_convolution': 'patch embed (conv)',
}


def build(key: str, size: int) -> torch.nn.Module:
    name = key if key.startswith('vit_') else f'pe_vit_small_patch16_{key}_224'
    return timm.create_model(name, img_size=size).eval()


def profile_models(keys: List[str], batch_size: int, size: int, forwards: int) -> Dict[str, Dict[str, float]]:
    """Median over forwards of the self CPU ms of every operator group, per model key (``key@real`` forces timm's
    kernel); the median, not the mean, so that a forward preempted by other jobs does not count."""
    x = torch.randn(batch_size, 3, size, size)
    models = {k: build(k.split('@')[0], size) for k in keys}
    runs = {k: [] for k in keys}
    fast_table = RotaryTerm._complex_table
    with torch.inference_mode():
        for _ in range(forwards + 1):
            for key, model in models.items():
                RotaryTerm._complex_table = (lambda self, t: None) if key.endswith('@real') else fast_table
                try:
                    with profile(activities=[ProfilerActivity.CPU]) as prof:
                        model(x)
                finally:
                    RotaryTerm._complex_table = fast_table
                one = collections.Counter()
                for e in prof.key_averages():
                    one[GROUPS.get(e.key, 'other')] += e.self_cpu_time_total / 1e3
                    one['total'] += e.self_cpu_time_total / 1e3
                runs[key].append(one)
    out = {}
    for key, per_forward in runs.items():
        per_forward = per_forward[1:]  # the first forward builds the cached tables: not counted
        groups = {g for one in per_forward for g in one}
        out[key] = {g: statistics.median(one[g] for one in per_forward) for g in groups}
    return out


def kernel_ms(batch_size: int, tokens: int, heads: int = 6, head_dim: int = 64, calls: int = 30) -> Dict[str, float]:
    """Median process-clock ms of one layer's rotation (q and k, strided views of a fused qkv buffer, per-head tables
    as RoPE-Mixed has) with the zoo's kernel and with timm's real kernel forced, timed alternately."""
    qkv = torch.randn(batch_size, tokens, 3 * heads, head_dim).transpose(1, 2)
    q, k, _ = qkv.split([heads] * 3, dim=1)
    term = RotaryTerm.from_angles(torch.randn(1, heads, tokens, head_dim // 2) * 10)
    real = RotaryTerm(term.sin, term.cos)  # pairs_equal False: apply_rope, timm's apply_rot_embed
    times = {'zoo kernel (complex multiply)': [], "timm's real kernel": []}
    with torch.inference_mode():
        for _ in range(calls):
            for name, t in zip(times, (term, real)):
                t0 = time.process_time()
                t.rotate(q, k)
                times[name].append(1e3 * (time.process_time() - t0))
    return {name: statistics.median(v) for name, v in times.items()}


def to_markdown(acc: Dict[str, Dict[str, float]], args: argparse.Namespace, command: str) -> str:
    keys = list(acc)
    groups = sorted({g for a in acc.values() for g in a if g != 'total'},
                    key=lambda g: -max(a.get(g, 0.0) for a in acc.values()))
    lines = [f'Command: `{command}`', '',
             f'CPU {platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1 thread, torch '
             f'{torch.__version__}, timm {timm.__version__}; batch {args.batch_size} at {args.size} px, inference '
             f'mode, '
             f'median self CPU ms per forward over {args.forwards} profiled forwards (torch.profiler; the total is '
             f'the median of the totals, not the sum of the rows). `@real` = '
             f'timm\'s real rotation kernel forced (the zoo\'s kernel before issue 24). Load average at the end: '
             f'{" / ".join(f"{v:.1f}" for v in os.getloadavg())}.', '',
             '| operator group | ' + ' | '.join(f'`{k}`' for k in keys) + ' |', '|---|' + '---|' * len(keys)]
    for g in groups + ['total']:
        lines.append(f'| {g} | ' + ' | '.join(f'{acc[k].get(g, 0.0):.1f}' for k in keys) + ' |')
    tokens = 1 + (args.size // 16) ** 2
    kernels = kernel_ms(args.batch_size, tokens)
    lines += ['', f'One layer\'s rotation of q and k, `(B, H, L, D) = ({args.batch_size}, 6, {tokens}, 64)` float32 '
              'strided views of the fused qkv, per-head tables; median process-clock ms of 30 calls, alternating:', '',
              '| kernel | ms per layer |', '|---|---|'] + [f'| {n} | {v:.2f} |' for n, v in kernels.items()]
    return '\n'.join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--models', nargs='+', default=['vit_small_patch16_224', 'ape', 'rope_axial@real',
                                                        'rope_axial', 'rope_mixed@real', 'rope_mixed'])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--forwards', type=int, default=3)
    parser.add_argument('--out', help='write the markdown table here')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    command = f'python benchmarks/rope_profile.py {" ".join(sys.argv[1:] if argv is None else argv)}'
    table = to_markdown(profile_models(args.models, args.batch_size, args.size, args.forwards), args, command)
    print(table)
    if args.out:
        tmp = f'{args.out}.tmp{os.getpid()}'
        with open(tmp, 'w') as f:
            f.write(table + '\n')
        os.replace(tmp, args.out)


if __name__ == '__main__':
    main()
