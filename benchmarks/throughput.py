"""CPU throughput of every PE in the same ViT-S backbone, as ratios to baselines timed in the same process.

Usage::

    python benchmarks/throughput.py                       # image inference + training step, every PE, 224 px
    python benchmarks/throughput.py --no-train --pes ape rope_mixed --runs 3 --repeats 5
    python benchmarks/throughput.py --train-only --memory # training step and its peak memory
    python benchmarks/throughput.py --video --memory      # video ViT-S, 16 frames of 224 px, batch 1, + peak memory

Protocol (issue 24): the process clock (``--clock cpu``: ``time.process_time``, the CPU time of this process only,
so other jobs on a shared machine do not inflate it) and one thread (``--threads 1``) by default. Models are timed
round-robin (one batch of each model per round, ``--repeats`` rounds after ``--warmup`` rounds), so background load
hits all models alike; a run gives each model its median over the rounds and its ratio to the reference model of the
same run. ``--runs`` independent runs follow each other in the same process (the same models, order rotated, each
run with its own warm-up rounds); tables give the median ratio over the runs and the spread (lowest-highest ratio of
the runs), and targets are judged on the median. Batch 8 for images (``torch.inference_mode`` for inference; a
training step is forward, cross-entropy, backward and an SGD step). Peak memory (``--memory``) is the growth of the
peak resident set size of a fresh process while it runs two steps of that one model, in MiB
(:func:`measure_peak_mib`); with ``--video`` one fresh process per model and run, the models interleaved, and the
page gives the median and the spread of the per-run ratios. The page states the machine, the clock, the threads and
the load average (``os.getloadavg``) at the start and the end.

Each row names its reference and target (:data:`TARGETS`, the issue's targets): timm's ``vit_small_patch16_224``
(``timm APE``) for the RoPE family and the additive PEs; our ``ape`` for iRPE, the distance biases and URPE; the
base PE for LaPE; our ``rope_mixed`` for GTA, ComRoPE and LieRE.

``--video``: the 3D PEs in the video ViT-S (``pe_video_vit_small_patch16_<pe>_224``: tubelet 2 x 16 x 16, no class
token, mean pooling) on clips of ``--frames`` frames of ``--sizes`` px, batch 1 by default; ratios to our ``sincos``
video model (VideoMAE's fixed 1D table) of the same clip and mode, and ``--memory`` measures the peak memory of the
``--memory-pes``.
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
from typing import Any, Callable, Dict, List, Tuple

import timm
import torch
import torch.nn.functional as F

import zoo  # noqa: F401
from zoo.runs.options import parse_model_kwargs

TIMM_BASELINES = ['vit_small_patch16_224', 'vit_small_patch16_rope_224', 'vit_small_patch16_rope_mixed_224']
DEFAULT_PES = ['ape', 'sincos', 'nope', 'peg', 'fourier', 'rope_axial', 'rope_mixed', 'rope_mixed_ape',
               'irpe_k', 'irpe_qkv', 'comrope_ap', 'comrope_ld', 'liere',
               # the seed issues' encodings
               'alibi', 'kerple_log', 'kerple_power', 'fire', 'ape_lape', 'sincos_lape', 'fourier_lape', 'gta', 'urpe',
               'loope', 'seqpe']
TRAIN_PES = ['ape', 'rope_axial', 'rope_mixed', 'irpe_k', 'irpe_qkv', 'comrope_ap', 'comrope_ld', 'liere', 'alibi',
             'ape_lape', 'gta', 'urpe']
TIMM_APE = 'vit_small_patch16_224'
# pe -> (reference model of the same run, limit of time / reference time): the targets of issue 24 and its seeds
TARGETS = {
    'rope_axial': (TIMM_APE, 1.02), 'rope_mixed': (TIMM_APE, 1.02), 'rope_mixed_ape': (TIMM_APE, 1.05),
    'ape': (TIMM_APE, 1.05), 'sincos': (TIMM_APE, 1.05), 'nope': (TIMM_APE, 1.05), 'peg': (TIMM_APE, 1.05),
    'fourier': (TIMM_APE, 1.05),
    'irpe_k': ('ape', 1.10), 'irpe_qkv': ('ape', 1.3),
    'alibi': ('ape', 1.05), 'kerple_log': ('ape', 1.05), 'kerple_power': ('ape', 1.05), 'fire': ('ape', 1.05),
    'ape_lape': ('ape', 1.03), 'sincos_lape': ('sincos', 1.03), 'fourier_lape': ('fourier', 1.03),
    'gta': ('rope_mixed', 1.10), 'urpe': ('ape', 1.3),
    'comrope_ap': ('rope_mixed', 1.05), 'comrope_ld': ('rope_mixed', 1.05), 'liere': ('rope_mixed', 1.05),
    'loope': ('ape', None), 'seqpe': ('ape', None),
}
# video: pe -> (time limit, peak-memory limit) against our sincos video model (16 x 224^2, batch 1)
VIDEO_TARGETS = {'rope3d': (1.05, None), 'irpe_k': (1.25, 1.3), 'comrope_ld': (1.20, 2.0), 'liere': (1.20, 2.0),
                 'comrope_ap': (1.20, 2.0)}
CLOCKS = {'wall': time.perf_counter, 'cpu': time.process_time}
VIDEO_PES = ['sincos', 'ape', 'st_ape', 'sincos3d', 'nope', 'peg', 'fourier', 'rope3d', 'rope_mixed', 'comrope_ap',
             'comrope_ld', 'liere', 'irpe_k', 'alibi', 'kerple_log', 'fire', 'ape_lape', 'sincos3d_lape', 'gta',
             'seqpe']


def split_key(key: str) -> Tuple[str, Dict[str, Any]]:
    """A ``--pes`` entry ``suffix[:option=value,...]`` as the model suffix and the encoding options it gives
    (``liere:per_layer=false,per_head=false``; values parsed as YAML, :func:`zoo.runs.options.parse_model_kwargs`).

    Raises:
        ValueError: an option without ``=``.
    """
    suffix, _, opts = key.partition(':')
    return suffix, parse_model_kwargs([o for o in opts.split(',') if o])


def model_name(key: str) -> str:
    suffix = split_key(key)[0]
    return suffix if suffix.startswith('vit_') else f'pe_vit_small_patch16_{suffix}_224'


def build(key: str, size: int, frames: int = 0) -> torch.nn.Module:
    """The image model of ``key`` (``suffix[:option=value,...]``, :func:`split_key`) at ``size`` px, or with
    ``frames`` > 0 the video ViT-S at ``frames`` frames."""
    suffix, options = split_key(key)
    extra = dict(pe_kwargs=options) if options else {}
    if frames:
        return timm.create_model(f'pe_video_vit_small_patch16_{suffix}_224', img_size=size, num_frames=frames,
                                 num_classes=400, **extra)
    return timm.create_model(model_name(key), img_size=size, num_classes=1000, **extra)


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


def load() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``'3.1 / 2.8 / 2.5'`` (``'n/a'`` where the OS has none)."""
    try:
        return ' / '.join(f'{v:.1f}' for v in os.getloadavg())
    except OSError:
        return 'n/a'


def machine(args: argparse.Namespace) -> str:
    cpu = platform.processor() or platform.machine()
    clock = ('process clock (time.process_time: CPU time of the benchmark process)' if args.clock == 'cpu'
             else 'wall clock (time.perf_counter)')
    return (f'CPU {cpu}, {os.cpu_count()} cores, {args.threads} thread(s), {clock}; torch {torch.__version__}, '
            f'timm {timm.__version__}, Python {platform.python_version()}')


def ratios(per_run: List[Dict[str, float]], key: str, ref: str) -> List[float]:
    return [r[key] / r[ref] for r in per_run if key in r and ref in r]


def verdict(values: List[float], limit) -> str:
    if limit is None or not values:
        return '-'
    return 'met' if statistics.median(values) <= limit else 'not met'


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


def _timed_runs(make_steps: Callable[[], Dict[str, Callable[[], None]]], args: argparse.Namespace,
                label: str) -> List[Dict[str, float]]:
    """``args.runs`` round-robin runs of the same models (built once; the order rotated by one per run), each with its
    own ``--warmup`` rounds."""
    steps = make_steps()
    keys = list(steps)
    per_run = []
    for run_idx in range(args.runs):
        shift = run_idx % max(1, len(keys))
        order = {k: steps[k] for k in keys[shift:] + keys[:shift]}
        per_run.append(time_round_robin(order, args.warmup, args.repeats, CLOCKS[args.clock]))
        print(f'done: {label}, run {run_idx + 1} of {args.runs} (load {load()})', file=sys.stderr)
    del steps
    return per_run


def _steps(keys: List[str], mode: str, size: int, batch_size: int, frames: int = 0) -> Dict[str, Callable[[], None]]:
    x = make_input(batch_size, size, frames)
    steps = {}
    for key in keys:
        try:
            steps[key] = (infer_step if mode == 'infer' else train_step)(build(key, size, frames), x)
        except (RuntimeError, ValueError, TypeError) as err:  # an encoding that is not available in this checkout
            print(f'skipping {key}: {err}', file=sys.stderr)
    return steps


def run(args: argparse.Namespace) -> List[Dict]:
    """Image ViT-S rows: per mode and size, every PE with the ms of the median run, its ratio to timm APE, to our
    ``ape`` and to its target's reference (median and spread over ``--runs``), and the target's verdict."""
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rows = []
    modes = ([] if args.train_only else ['infer']) + ([] if args.no_train else ['train'])
    for mode in modes:
        pes = args.pes if mode == 'infer' or args.train_pes is None else args.train_pes
        keys = [TIMM_APE] + (TIMM_BASELINES[1:] if args.timm_rope else []) + [p for p in pes if p != TIMM_APE]
        needed = {TARGETS[split_key(p)[0]][0] for p in keys if split_key(p)[0] in TARGETS} - {TIMM_APE}
        keys += [k for k in sorted(needed) if k not in keys]  # the references the targets ask for
        for size in args.sizes:
            per_run = _timed_runs(lambda: _steps(keys, mode, size, args.batch_size), args, f'{mode} at {size}')
            for key in per_run[0]:
                ref, limit = TARGETS.get(split_key(key)[0], (TIMM_APE, None))
                vs_ref = ratios(per_run, key, ref)
                row = dict(mode=mode, size=size, model=model_name(key), pe=key,
                           ms=1e3 * statistics.median([r[key] for r in per_run]),
                           vs_timm_ape=statistics.median(ratios(per_run, key, TIMM_APE)),
                           vs_ape=statistics.median(ratios(per_run, key, 'ape')) if 'ape' in per_run[0] else None,
                           reference=ref, vs_ref=statistics.median(vs_ref), vs_ref_runs=vs_ref, target=limit,
                           verdict=verdict(vs_ref, limit) if mode == 'infer' else '-')
                row['img_per_s'] = args.batch_size / (row['ms'] / 1e3)
                if args.memory and (args.memory_pes is None or key in args.memory_pes):
                    row['peak_mib'] = peak_memory_mib(key, size, args.batch_size, mode)
                rows.append(row)
    return rows


def _ref_name(ref: str) -> str:
    return 'timm APE' if ref == TIMM_APE else f'our {ref}'


def _spread(values: List[float]) -> str:
    return f'{min(values):.2f}-{max(values):.2f}' if values else '-'


def to_markdown(rows: List[Dict], args: argparse.Namespace, started: str) -> str:
    lines = [machine(args) + '.', '',
             f'Batch {args.batch_size}; {args.runs} runs in one process, each {args.repeats} round-robin rounds after '
             f'{args.warmup} warm-up round(s); ms is the median over runs of each run\'s median; ratios are the median '
             f'over runs, spread = lowest-highest ratio of the runs. Load average (1/5/15 min): {started} at the '
             f'start, {load()} at the end.', '']
    mem = ' peak MiB |' if args.memory else ''
    lines.append(f'| mode | size | PE | ms/batch | vs timm APE | vs our ape | target reference | ratio (median) | '
                 f'spread | target | |{mem}')
    lines.append('|---|---|---|---|---|---|---|---|---|---|---|' + ('---|' if args.memory else ''))
    for r in rows:
        mem = (f' {r["peak_mib"]:.0f} |' if 'peak_mib' in r else ' - |') if args.memory else ''
        vs_ape = '-' if r['vs_ape'] is None else f'{r["vs_ape"]:.2f}'
        target = '-' if r['target'] is None or r['mode'] != 'infer' else f'<= {r["target"]:.2f}'
        lines.append(f'| {r["mode"]} | {r["size"]} | `{r["pe"]}` | {r["ms"]:.0f} | {r["vs_timm_ape"]:.2f} | {vs_ape} | '
                     f'{_ref_name(r["reference"])} | {r["vs_ref"]:.2f} | {_spread(r["vs_ref_runs"])} | {target} | '
                     f'{r["verdict"]} |{mem}')
    return '\n'.join(lines)


def run_video(args: argparse.Namespace) -> List[Dict]:
    """Video ViT-S per 3D PE: median ms per batch and the ratio to our ``sincos`` video model (median and spread over
    ``--runs``), per clip and mode; ``--memory``: the peak memory of the ``--memory-pes`` and its ratio to sincos."""
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rows = []
    modes = ([] if args.train_only else ['infer']) + ([] if args.no_train else ['train'])
    pes = ['sincos'] + [p for p in args.pes if p != 'sincos']
    for mode in modes:
        for frames in args.frames:
            for size in args.sizes:
                per_run = [] if args.memory_only else _timed_runs(
                    lambda: _steps(pes, mode, size, args.batch_size, frames), args, f'{mode} at {frames}x{size}')
                keys = list(per_run[0]) if per_run else list(args.memory_pes)
                for key in keys:
                    row = dict(mode=mode, frames=frames, size=size, tokens=(frames // 2) * (size // 16) ** 2,
                               model=f'pe_video_vit_small_patch16_{key}_224', pe=key)
                    if per_run:
                        vs = ratios(per_run, key, 'sincos')
                        row.update(ms=1e3 * statistics.median([r[key] for r in per_run]),
                                   vs_sincos=statistics.median(vs), vs_sincos_runs=vs)
                    rows.append(row)
                if args.memory or args.memory_only:  # --runs fresh processes per model, models interleaved
                    mem_rows = [r for r in rows[-len(keys):] if r['pe'] in args.memory_pes]
                    for run_idx in range(args.runs):
                        for r in mem_rows[run_idx % len(mem_rows):] + mem_rows[:run_idx % len(mem_rows)]:
                            r.setdefault('peak_runs', []).append(
                                peak_memory_mib(r['pe'], size, args.batch_size, mode, frames))
                    for r in mem_rows:
                        r['peak_mib'] = statistics.median(r['peak_runs'])
    for r in rows:  # the memory ratio against sincos of the same clip and mode, per run (median and spread)
        if 'peak_mib' in r:
            ref = [q for q in rows if q['pe'] == 'sincos' and 'peak_mib' in q and
                   (q['mode'], q['frames'], q['size']) == (r['mode'], r['frames'], r['size'])]
            ok = ref and min(ref[0]['peak_runs']) > 0
            r['peak_vs_sincos_runs'] = [a / b for a, b in zip(r['peak_runs'], ref[0]['peak_runs'])] if ok else []
            r['peak_vs_sincos'] = statistics.median(r['peak_vs_sincos_runs']) if ok else float('nan')
        time_limit, mem_limit = VIDEO_TARGETS.get(split_key(r['pe'])[0], (None, None))
        r['target'], r['memory_target'] = time_limit, mem_limit
        r['verdict'] = verdict(r.get('vs_sincos_runs', []), time_limit) if r['mode'] == 'infer' else '-'
        if r['mode'] == 'infer' and mem_limit is not None and 'peak_vs_sincos' in r:
            r['memory_verdict'] = verdict(r['peak_vs_sincos_runs'], mem_limit)
    return rows


def video_markdown(rows: List[Dict], args: argparse.Namespace, started: str) -> str:
    lines = [machine(args) + '.', '',
             f'Video ViT-S (tubelet 2 x 16 x 16), batch {args.batch_size}; ' +
             ('' if args.memory_only else
              f'{args.runs} runs in one process, each {args.repeats} round-robin rounds after {args.warmup} warm-up '
              f'round(s); ms is the median over runs of each run\'s median; ratios to our sincos video model are the '
              f'median over runs, spread = lowest-highest ratio of the runs. ') +
             f'Load average (1/5/15 min): {started} at the start, {load()} at the end.', '']
    timed = [r for r in rows if 'ms' in r]
    if timed:
        lines += ['| mode | clip | tokens | PE | ms/batch | vs our sincos (median) | spread | target | |',
                  '|---|---|---|---|---|---|---|---|---|']
        for r in timed:
            target = '-' if r['target'] is None or r['mode'] != 'infer' else f'<= {r["target"]:.2f}'
            lines.append(f'| {r["mode"]} | {r["frames"]}x{r["size"]}² | {r["tokens"]} | `{r["pe"]}` | {r["ms"]:.0f} | '
                         f'{r["vs_sincos"]:.2f} | {_spread(r["vs_sincos_runs"])} | {target} | {r["verdict"]} |')
    mem = [r for r in rows if 'peak_mib' in r]
    if mem:
        lines += ['', 'Peak memory: growth of the resident set size at its peak while a fresh process runs two '
                  'steps of one model, over its size before them (MiB; peak reset through /proc/self/clear_refs). '
                  f'{args.runs} fresh process(es) per model, the models interleaved; MiB and the ratio to our sincos '
                  'are medians over them (the ratio taken per run), spread = lowest-highest ratio (the allocator makes '
                  'single measurements of the same model differ by up to ~±20 %).', '',
                  '| mode | clip | PE | peak MiB | runs (MiB) | vs our sincos (median) | spread | target | |',
                  '|---|---|---|---|---|---|---|---|---|']
        for r in mem:
            target = '-' if r['memory_target'] is None or r['mode'] != 'infer' else f'<= {r["memory_target"]:.2f}'
            runs = ', '.join(f'{v:.0f}' for v in r['peak_runs'])
            lines.append(f'| {r["mode"]} | {r["frames"]}x{r["size"]}² | `{r["pe"]}` | {r["peak_mib"]:.0f} | {runs} | '
                         f'{r["peak_vs_sincos"]:.2f} | {_spread(r["peak_vs_sincos_runs"])} | {target} | '
                         f'{r.get("memory_verdict", "-")} |')
    return '\n'.join(lines)


def _atomic_write(path: str, text: str) -> None:
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)


def command_line(script: str, argv=None) -> str:
    """The command a page states: ``python benchmarks/<script> <arguments>`` (``argv``, or this process's)."""
    return f'python benchmarks/{script} {" ".join(sys.argv[1:] if argv is None else argv)}'


def write_page(path: str, text: str) -> None:
    """Write a benchmark page atomically, creating its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _atomic_write(path, text)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=DEFAULT_PES,
                        help='PE suffixes of pe_vit_small_patch16_*_224 (pe_video_vit_... with --video), each '
                             'optionally followed by encoding options passed as pe_kwargs, option=value items after '
                             'a colon, comma-separated, values read as YAML: liere:per_layer=false,per_head=false; '
                             '--train-pes and --memory-pes take the same form')
    parser.add_argument('--train-pes', nargs='+', default=TRAIN_PES, help='PEs of the training-step table')
    parser.add_argument('--sizes', nargs='+', type=int, default=[224])
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--runs', type=int, default=3, help='independent round-robin runs in this process')
    parser.add_argument('--repeats', type=int, default=5, help='timed rounds per run')
    parser.add_argument('--warmup', type=int, default=1, help='untimed rounds per run')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--timm-rope', action='store_true', help='also time timm\'s RoPE and RoPE-Mixed ViT-S')
    parser.add_argument('--no-train', action='store_true', help='skip the training-step timing')
    parser.add_argument('--train-only', action='store_true', help='skip the inference timing')
    parser.add_argument('--memory', action='store_true', help='also measure peak memory (one process per model)')
    parser.add_argument('--out', help='write the markdown table here (and a .json beside it)')
    parser.add_argument('--video', action='store_true', help='video ViT-S with 3D PEs (defaults: --pes all 3D PEs, '
                                                             '--frames 16, --sizes 224, --batch-size 1)')
    parser.add_argument('--frames', nargs='+', type=int, default=[16], help='--video: clip lengths (frames)')
    parser.add_argument('--clock', choices=sorted(CLOCKS), default='cpu',
                        help='cpu = this process\'s CPU time (time.process_time, the default), robust to other jobs '
                             'on a shared machine; with --threads 1 it is the compute time; or wall')
    parser.add_argument('--memory-only', action='store_true', help='--video: only the peak memory of --memory-pes')
    parser.add_argument('--memory-pes', nargs='+', default=None,
                        help='--memory: the PEs whose peak memory is measured (video default: sincos, rope3d, irpe_k, '
                             'comrope_ld, liere; images: all)')
    args = parser.parse_args(argv)
    if args.runs < 1 or args.repeats < 1 or args.warmup < 0 or args.threads < 1:
        parser.error('--runs, --repeats and --threads must be >= 1 and --warmup >= 0')
    for key in dict.fromkeys((args.pes or []) + (args.train_pes or []) + (args.memory_pes or [])):
        try:
            options = split_key(key)[1]
        except ValueError:
            parser.error(f'{key!r}: encoding options go after the colon as option=value items separated by commas, '
                         f'e.g. liere:per_layer=false,per_head=false')
        if options:  # the encoding checks its options: refuse bad ones now, not as a skipped row later
            try:
                build(key, args.sizes[0], args.frames[0] if args.video else 0)
            except (TypeError, ValueError, RuntimeError) as e:  # RuntimeError: timm's unknown model
                parser.error(f'{key!r}: {str(e).splitlines()[0]}')
    given = set(argv if argv is not None else sys.argv[1:])
    started = load()
    if args.video:
        if '--pes' not in given:
            args.pes = VIDEO_PES
        if '--batch-size' not in given:
            args.batch_size = 1
        if args.memory_pes is None:
            args.memory_pes = ['sincos', 'rope3d', 'irpe_k', 'comrope_ld', 'liere']
        rows = run_video(args)
        table = video_markdown(rows, args, started)
    else:
        if '--train-pes' not in given and '--pes' in given:
            args.train_pes = None  # train what --pes names
        rows = run(args)
        table = to_markdown(rows, args, started)
    print(table)
    if args.out:
        command = command_line('throughput.py', argv)
        write_page(args.out, f'Command: `{command}`\n\n{table}\n')
        _atomic_write(os.path.splitext(args.out)[0] + '.json',
                      json.dumps(dict(command=command, machine=machine(args), rows=rows), indent=1))


if __name__ == '__main__':
    main()
