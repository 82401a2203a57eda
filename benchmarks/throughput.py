"""CPU throughput of every 2D PE in the same ViT-S backbone, as ratios to timm baselines timed in the same run.

Usage::

    python benchmarks/throughput.py                       # all PEs, 224 and 384, inference + training step
    python benchmarks/throughput.py --video --memory      # video ViT-S, 8 and 16 frames of 224 px, batch 2
    python benchmarks/throughput.py --pes ape rope_mixed --sizes 224 --no-train --repeats 5
    python benchmarks/throughput.py --train-only --pes ape rope_mixed irpe_k comrope_ap

Protocol: batch 8 (``--batch-size``), ``torch.inference_mode`` for inference; a training step is forward, cross-entropy,
backward and an SGD step. Models are timed round-robin (one batch of each model per round, ``--repeats`` rounds after
``--warmup`` rounds), so background load hits all models alike; the table gives medians. Ratios are time / time of the
reference model of the same size and mode: timm's ``vit_small_patch16_224`` for inference (``ratio vs timm APE``) and
our ``rope_mixed`` (``ratio vs rope_mixed``). Peak memory (``--memory``) is the growth of the peak resident set size
(ru_maxrss) of a fresh process while it runs the timed loop of that one model, in MiB.

``--video``: every 3D PE in the video ViT-S (``pe_video_vit_small_patch16_<pe>_224``: tubelet 2 x 16 x 16, no class
token, mean pooling) on clips of ``--frames`` frames of ``--sizes`` px, batch 2 by default; ratios are time / time of
our ``sincos`` video model (VideoMAE's fixed 1D table) of the same clip and mode, and ``--memory`` measures the peak
memory of the ``--memory-pes`` only (iRPE's per-pair tables against the sin-cos baseline).
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
CLOCKS = {'wall': time.perf_counter, 'cpu': time.process_time}
VIDEO_PES = ['sincos', 'ape', 'st_ape', 'sincos3d', 'nope', 'peg', 'fourier', 'rope3d', 'rope_mixed', 'comrope_ap',
             'comrope_ld', 'liere', 'irpe_k']


def model_name(key: str) -> str:
    return key if key.startswith('vit_') else f'pe_vit_small_patch16_{key}_224'


def build(key: str, size: int, frames: int = 0) -> torch.nn.Module:
    """The image model of ``key`` at ``size`` px, or with ``frames`` > 0 the video ViT-S at ``frames`` frames."""
    if frames:
        return timm.create_model(f'pe_video_vit_small_patch16_{key}_224', img_size=size, num_frames=frames,
                                 num_classes=400)
    return timm.create_model(model_name(key), img_size=size, num_classes=1000)


def make_input(batch_size: int, size: int, frames: int = 0) -> torch.Tensor:
    return torch.randn(batch_size, 3, frames, size, size) if frames else torch.randn(batch_size, 3, size, size)


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


def time_round_robin(steps: Dict[str, Callable[[], None]], warmup: int, repeats: int,
                     clock: Callable[[], float] = time.perf_counter) -> Dict[str, float]:
    """Median seconds per call of each step, timed one call per model per round (``clock``: wall time by default;
    ``time.process_time`` counts this process's CPU time only, which other jobs on a shared machine do not inflate)."""
    times = {k: [] for k in steps}
    for r in range(warmup + repeats):
        for key, step in steps.items():
            t0 = clock()
            step()
            if r >= warmup:
                times[key].append(clock() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _status_kib(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise OSError(f'/proc/self/status has no {field}')


def measure_peak_mib(step: Callable[[], None]) -> float:
    """Growth of the resident set size (MiB) at its peak while ``step`` runs twice, over the RSS before.

    On Linux the high-water mark is reset first (``/proc/self/clear_refs``), so the peaks of building the model do
    not hide those of the steps; elsewhere it is the growth of ``ru_maxrss``.
    """
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        base = _status_kib('VmRSS')
        step()
        step()
        return (_status_kib('VmHWM') - base) / 1024
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        step()
        step()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024


def peak_memory_mib(key: str, size: int, batch_size: int, mode: str, frames: int = 0) -> float:
    """Run one model's steps in a fresh process and return its peak memory growth (MiB, :func:`measure_peak_mib`)."""
    code = (
        'import sys, torch; sys.path.insert(0, "benchmarks"); import throughput as t\n'
        f'torch.set_num_threads({torch.get_num_threads()})\n'
        f'm = t.build({key!r}, {size}, {frames}); x = t.make_input({batch_size}, {size}, {frames})\n'
        f'step = (t.infer_step if {mode!r} == "infer" else t.train_step)(m, x)\n'
        'print(t.measure_peak_mib(step))\n')
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
            med = time_round_robin(steps, args.warmup, args.repeats, CLOCKS[args.clock])
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


def run_video(args: argparse.Namespace) -> List[Dict]:
    """Video ViT-S per 3D PE: median ms per batch and the ratio to our ``sincos`` video model, per clip and mode."""
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rows = []
    modes = ([] if args.train_only else ['infer']) + ([] if args.no_train else ['train'])
    for mode in modes:
        for frames in args.frames:
            for size in args.sizes:
                if args.memory_only:
                    for key in args.memory_pes:
                        rows.append(dict(mode=mode, frames=frames, size=size, tokens=(frames // 2) * (size // 16) ** 2,
                                         model=f'pe_video_vit_small_patch16_{key}_224', pe=key,
                                         peak_mib=peak_memory_mib(key, size, args.batch_size, mode, frames)))
                    print(f'done: memory {mode} at {frames}x{size}', file=sys.stderr)
                    continue
                x = make_input(args.batch_size, size, frames)
                steps = {}
                for key in args.pes:
                    try:
                        steps[key] = (infer_step if mode == 'infer' else train_step)(build(key, size, frames), x)
                    except (RuntimeError, ValueError) as err:  # an encoding not available in this checkout
                        print(f'skipping {key}: {err}', file=sys.stderr)
                med = time_round_robin(steps, args.warmup, args.repeats, CLOCKS[args.clock])
                base = med.get('sincos', float('nan'))
                for key, sec in med.items():
                    row = dict(mode=mode, frames=frames, size=size, tokens=(frames // 2) * (size // 16) ** 2,
                               model=f'pe_video_vit_small_patch16_{key}_224', pe=key, ms=1e3 * sec,
                               clips_per_s=args.batch_size / sec, vs_sincos=sec / base)
                    if args.memory and key in args.memory_pes:
                        row['peak_mib'] = peak_memory_mib(key, size, args.batch_size, mode, frames)
                    rows.append(row)
                del steps
                print(f'done: {mode} at {frames}x{size}', file=sys.stderr)
    if args.memory or args.memory_only:  # the memory ratio against sincos of the same clip and mode
        for r in rows:
            if 'peak_mib' in r:
                ref = [q for q in rows if q['pe'] == 'sincos' and 'peak_mib' in q and
                       (q['mode'], q['frames'], q['size']) == (r['mode'], r['frames'], r['size'])]
                ok = ref and ref[0]['peak_mib'] > 0
                r['peak_vs_sincos'] = r['peak_mib'] / ref[0]['peak_mib'] if ok else float('nan')
    return rows


def video_markdown(rows: List[Dict], args: argparse.Namespace) -> str:
    cpu = platform.processor() or platform.machine()
    lines = [f'CPU ({os.cpu_count()} cores, {args.threads} threads, {cpu}), torch {torch.__version__}, '
             f'timm {timm.__version__}, video ViT-S (tubelet 2 x 16 x 16), batch {args.batch_size}' +
             ('.' if args.memory_only else
              f', median of {args.repeats} round-robin rounds after {args.warmup} warm-up rounds; times are '
              f'{"CPU time of the benchmark process (time.process_time)" if args.clock == "cpu" else "wall time"}.'),
             '']
    if not args.memory_only:
        lines += ['| mode | clip | tokens | PE | ms/batch | clips/s | vs our sincos |', '|---|---|---|---|---|---|---|']
    for r in (rows if not args.memory_only else []):
        lines.append(f'| {r["mode"]} | {r["frames"]}x{r["size"]}² | {r["tokens"]} | `{r["pe"]}` | {r["ms"]:.0f} | '
                     f'{r["clips_per_s"]:.2f} | {r["vs_sincos"]:.2f} |')
    mem = [r for r in rows if 'peak_mib' in r]
    if mem:
        lines += ['', 'Peak memory: growth of the resident set size at its peak while a fresh process runs two '
                  'steps of one model, over its size before them (MiB; peak reset through /proc/self/clear_refs).', '',
                  '| mode | clip | PE | peak MiB | vs our sincos |', '|---|---|---|---|---|']
        lines += [f'| {r["mode"]} | {r["frames"]}x{r["size"]}² | `{r["pe"]}` | {r["peak_mib"]:.0f} | '
                  f'{r["peak_vs_sincos"]:.2f} |' for r in mem]
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
    parser.add_argument('--video', action='store_true', help='video ViT-S with 3D PEs (defaults: --pes all 3D PEs, '
                                                             '--frames 8 16, --sizes 224, --batch-size 2)')
    parser.add_argument('--frames', nargs='+', type=int, default=[8, 16], help='--video: clip lengths (frames)')
    parser.add_argument('--clock', choices=sorted(CLOCKS), default='wall',
                        help='wall time, or cpu = this process\'s CPU time (time.process_time), robust to '
                             'other jobs on a shared machine; with --threads 1 it is the compute time')
    parser.add_argument('--memory-only', action='store_true', help='--video: only the peak memory of --memory-pes')
    parser.add_argument('--memory-pes', nargs='+', default=['sincos', 'irpe_k'],
                        help='--video --memory: the PEs whose peak memory is measured')
    args = parser.parse_args(argv)
    if args.video:
        given = set(argv if argv is not None else sys.argv[1:])
        if '--pes' not in given:
            args.pes = VIDEO_PES
        if '--sizes' not in given:
            args.sizes = [224]
        if '--batch-size' not in given:
            args.batch_size = 2
        rows = run_video(args)
        table = video_markdown(rows, args)
    else:
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
