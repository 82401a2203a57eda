"""Issue 24, part 7: the one prepared GPU check, a few minutes on a lent accelerator.

Usage::

    python benchmarks/gpu_speed.py --out docs/benchmarks/gpu_speed.md     # on the GPU machine (CUDA), ~2-4 min
    python benchmarks/gpu_speed.py --device cpu --quick                   # smoke test of the script itself

What it measures, all in bf16 (``model.to(torch.bfloat16)``, inputs bf16) under ``torch.inference_mode``:

* ``F.scaled_dot_product_attention`` alone, with no mask and with an additive float bias ``(1, H, L, L)`` (what
  iRPE, ALiBi / KERPLE / FIRE pass as ``attn_mask``), at the image size (ViT-S, 197 tokens, batch 64) and the video
  size (1568 tokens, batch 8): the cost of a bias on the fused kernels;
* image ViT-S/16 at 224 (batch 64): timm's ``vit_small_patch16_224`` and our ape, rope_axial, rope_mixed, irpe_k,
  irpe_qkv, comrope_ap, comrope_ld, liere; ratios to timm's APE model and to our ape / rope_mixed;
* video ViT-S (tubelet 2 x 16 x 16) at 16 x 224² (batch 8): sincos, rope3d, irpe_k, comrope_ap, comrope_ld, liere and
  LieRE with shared generators (``liere:per_layer=false,per_head=false``); ratios to our sincos video model.

Timing: CUDA events around each call after ``--warmup`` calls, models round-robin (one call each per round, like
``benchmarks/throughput.py``), ``--repeats`` rounds, the median per model; peak memory is
``torch.cuda.max_memory_allocated`` over one model's calls (reset before it), in MiB. The page names the device
(``torch.cuda.get_device_name``), torch and timm versions, and the command. With ``--device cpu`` the same code runs on
the process clock with tiny sizes (``--quick``): a check that the script works before a device is lent.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List

import timm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import build, command_line, write_page  # noqa: E402  (one model builder for every benchmark)

IMAGE_PES = ['vit_small_patch16_224', 'ape', 'rope_axial', 'rope_mixed', 'irpe_k', 'irpe_qkv', 'comrope_ap',
             'comrope_ld', 'liere']
VIDEO_PES = ['sincos', 'rope3d', 'irpe_k', 'comrope_ap', 'comrope_ld', 'liere', 'liere:per_layer=false,per_head=false']
# row -> the reference its ratio is taken against (same run)
IMAGE_REFS = {'ape': 'vit_small_patch16_224', 'rope_axial': 'vit_small_patch16_224',
              'rope_mixed': 'vit_small_patch16_224', 'irpe_k': 'ape', 'irpe_qkv': 'ape', 'comrope_ap': 'rope_mixed',
              'comrope_ld': 'rope_mixed', 'liere': 'rope_mixed'}


class Timer:
    """Seconds per call of ``fn``: CUDA events on a CUDA device, the process clock on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == 'cuda'

    def __call__(self, fn: Callable[[], None]) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
        t0 = time.process_time()
        fn()
        return time.process_time() - t0


def round_robin(steps: Dict[str, Callable[[], None]], timer: Timer, warmup: int, repeats: int) -> Dict[str, float]:
    """Median seconds per call of each step, one call per step per round."""
    times: Dict[str, List[float]] = {k: [] for k in steps}
    for r in range(warmup + repeats):
        for key, step in steps.items():
            t = timer(step)
            if r >= warmup:
                times[key].append(t)
    return {k: statistics.median(v) for k, v in times.items()}


def peak_mib(step: Callable[[], None], device: torch.device) -> float:
    """Peak allocated memory (MiB) over two calls of ``step`` on a CUDA device; NaN elsewhere."""
    if device.type != 'cuda':
        return float('nan')
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    step()
    step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated(device) - base) / 2 ** 20


def sdpa_rows(args: argparse.Namespace, device: torch.device, timer: Timer) -> List[Dict]:
    """SDPA alone, bf16, without and with an additive bias, at the image and the video token counts."""
    rows = []
    sizes = [(args.image_batch, 197), (args.video_batch, 1568)] if not args.quick else [(2, 17), (1, 65)]
    heads, dim = 6, 64
    for batch, n in sizes:
        q, k, v = (torch.randn(batch, heads, n, dim, device=device, dtype=torch.bfloat16) for _ in range(3))
        bias = torch.randn(1, heads, n, n, device=device, dtype=torch.bfloat16)
        steps = {'no mask': lambda: F.scaled_dot_product_attention(q, k, v),
                 'float bias': lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias)}
        with torch.inference_mode():
            med = round_robin(steps, timer, args.warmup, args.repeats)
        for key, sec in med.items():
            rows.append(dict(tokens=n, batch=batch, case=key, ms=sec * 1e3, ratio=sec / med['no mask']))
    return rows


def model_rows(pes: List[str], refs: Dict[str, str], frames: int, batch: int, size: int, args: argparse.Namespace,
               device: torch.device, timer: Timer) -> List[Dict]:
    """bf16 inference of every model in ``pes`` (built by ``throughput.build``), round-robin, with peak memory."""
    x = (torch.randn(batch, 3, frames, size, size) if frames else torch.randn(batch, 3, size, size))
    x = x.to(device=device, dtype=torch.bfloat16)
    models = {}
    for key in pes:
        torch.manual_seed(0)
        m = build(key, size, frames).to(device=device, dtype=torch.bfloat16).eval()
        models[key] = m

    def step_of(model):
        def step():
            with torch.inference_mode():
                model(x)
        return step
    steps = {k: step_of(m) for k, m in models.items()}
    med = round_robin(steps, timer, args.warmup, args.repeats)
    peaks = {k: peak_mib(s, device) for k, s in steps.items()}
    base = pes[0]
    rows = []
    for key in pes:
        ref = refs.get(key, base)
        rows.append(dict(pe=key, ms=med[key] * 1e3, vs_base=med[key] / med[base], reference=ref,
                         vs_ref=med[key] / med[ref], peak_mib=peaks[key],
                         peak_vs_base=peaks[key] / peaks[base] if peaks[base] else float('nan')))
    return rows


def markdown(sdpa: List[Dict], image: List[Dict], video: List[Dict], args: argparse.Namespace,
             device: torch.device, command: str, geometry: Dict[str, int]) -> str:
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' else f'CPU {platform.machine()}'
    clock = 'CUDA events' if device.type == 'cuda' else 'process clock (time.process_time)'
    lines = (['**QUICK SMOKE RUN (tiny sizes, CPU): a check that the script runs, not a measurement.**', '']
             if args.quick else [])
    lines += [f'Command: `{command}`', '',
             f'Device: {name}; {clock}; bf16 weights and inputs, torch.inference_mode; torch {torch.__version__}, '
             f'timm {timm.__version__}. Models round-robin, {args.repeats} timed rounds after {args.warmup} warm-up '
             f'round(s), median per model; peak = torch.cuda.max_memory_allocated growth over two calls (MiB; nan '
             f'off CUDA).', '',
             '## SDPA alone (6 heads, head dim 64)', '',
             '| tokens | batch | attn_mask | ms | vs no mask |', '|---|---|---|---|---|']
    lines += [f'| {r["tokens"]} | {r["batch"]} | {r["case"]} | {r["ms"]:.3f} | {r["ratio"]:.2f} |' for r in sdpa]
    g = geometry
    for title, rows, base in ((f'Image ViT-S/16 at {g["size"]} px, batch {g["image_batch"]}', image, 'timm APE'),
                              (f'Video ViT-S, {g["frames"]} x {g["size"]}², batch {g["video_batch"]}', video,
                               'our sincos')):
        lines += ['', f'## {title}', '',
                  f'| PE | ms | vs {base} | reference | vs reference | peak MiB | peak vs {base} |',
                  '|---|---|---|---|---|---|---|']
        lines += [f'| `{r["pe"]}` | {r["ms"]:.2f} | {r["vs_base"]:.2f} | {r["reference"]} | {r["vs_ref"]:.2f} | '
                  f'{r["peak_mib"]:.0f} | {r["peak_vs_base"]:.2f} |' for r in rows]
    return '\n'.join(lines) + '\n'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', default='cuda', help='cuda (the check) or cpu (a smoke test with --quick)')
    parser.add_argument('--image-batch', type=int, default=64)
    parser.add_argument('--video-batch', type=int, default=8)
    parser.add_argument('--repeats', type=int, default=10, help='timed rounds')
    parser.add_argument('--warmup', type=int, default=3, help='untimed rounds')
    parser.add_argument('--quick', action='store_true', help='tiny sizes: checks that the script runs')
    parser.add_argument('--out', help='write the markdown page here')
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0 or args.image_batch < 1 or args.video_batch < 1:
        parser.error('--repeats, --image-batch and --video-batch must be >= 1 and --warmup >= 0')
    try:
        device = torch.device(args.device)
    except RuntimeError:
        parser.error(f'--device {args.device!r} is not a device: use cuda (the check) or cpu (with --quick)')
    if device.type not in ('cuda', 'cpu'):
        parser.error(f'--device {args.device!r}: use cuda (the check) or cpu (with --quick)')
    if device.type == 'cuda' and not torch.cuda.is_available():
        parser.error('no CUDA device here: run this on the lent GPU machine, or use --device cpu --quick to check '
                     'the script')
    torch.backends.cuda.matmul.allow_tf32 = True
    timer = Timer(device)
    if args.quick:  # tiny sizes: the same code paths, seconds on a CPU
        size, frames, ib, vb = 64, 4, 2, 1
    else:
        size, frames, ib, vb = 224, 16, args.image_batch, args.video_batch
    sdpa = sdpa_rows(args, device, timer)
    image = model_rows(IMAGE_PES, IMAGE_REFS, 0, ib, size, args, device, timer)
    video = model_rows(VIDEO_PES, {}, frames, vb, size, args, device, timer)
    page = markdown(sdpa, image, video, args, device, command_line('gpu_speed.py', argv),
                    dict(size=size, frames=frames, image_batch=ib, video_batch=vb))
    print(page)
    if args.out:
        write_page(args.out, page)


if __name__ == '__main__':
    main()
