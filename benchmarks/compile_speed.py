"""Eager vs ``torch.compile`` (inductor) inference time of every registered image encoding in the same ViT, as ratios.

Usage::

    python benchmarks/compile_speed.py --out docs/benchmarks/compile_registry.md # every image model's PE, ViT-Ti
    python benchmarks/compile_speed.py --pes ape rope_mixed comrope_ld liere     # model suffixes
    python benchmarks/compile_speed.py --pes comrope:variant=ld,block_size=4     # an encoding with options

Protocol: the ViT of ``--model-size`` (ViT-Ti by default) at ``--size`` px, batch ``--batch-size`` (4), eval mode
under ``torch.inference_mode``. By default every registered image model's encoding: each ``{pe}`` of the registered
``pe_vit_<size>_patch16_{pe}_224`` entrypoints of any size (26 at the time of writing: every image encoding at its
defaults plus the registered variants such as ``comrope_ld``, ``irpe_qkv`` and ``peg0to5``), built through that
entrypoint (another size's with the ``--model-size`` geometry where ``--model-size`` has none). A
``--pes`` entry that is no such suffix is an encoding ``kind`` or ``kind:key=value[,key=value]`` built as a
``PEVisionTransformer`` with those ``pe_kwargs``. Each model is compiled once (``torch.compile(model)``, default
inductor backend; the first call, compilation included, is reported as ``compile s`` on the same clock: the process
clock leaves out inductor's compile workers), then ``--runs`` runs (3) follow
in the same process, each with ``--warmup`` untimed and ``--repeats`` timed rounds in which the eager and the
compiled model run alternately (one batch each, so background load hits both alike) on the process clock
(``time.process_time``) with one thread by default. Each run gives ``compiled / eager`` of its medians; the table
gives the median of the runs' ratios and their spread (lowest-highest). A ratio above 1 means compiling made that
encoding slower.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from typing import List

import timm
import torch

import zoo  # noqa: F401
from zoo.encodings import list_pos_encodings
from zoo.models.vit import PEVisionTransformer
from zoo.runs.options import parse_model_kwargs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import load  # noqa: E402  (the benchmarks share one load-average reading)

GEOMETRY = {'tiny': dict(embed_dim=192, depth=12, num_heads=3), 'small': dict(embed_dim=384, depth=12, num_heads=6),
            'base': dict(embed_dim=768, depth=12, num_heads=12)}


def image_pes() -> List[str]:
    """The ``{pe}`` suffix of every registered ``pe_vit_<size>_patch16_{pe}_224`` model (any size), sorted."""
    names = timm.list_models('pe_vit_*_patch16_*_224')
    return sorted({re.match(r'pe_vit_[a-z]+_patch16_(.+)_224$', n).group(1) for n in names})


def build(spec: str, args: argparse.Namespace) -> torch.nn.Module:
    """A registered image model's suffix (``comrope_ld``: the ``pe_vit_<size>_patch16_comrope_ld_224`` entrypoint,
    that of ``--model-size`` or another size's with the ``--model-size`` geometry), else ``kind`` or
    ``kind:key=value[,key=value]`` (values parsed as YAML: `zoo.runs.options.parse_model_kwargs`) as a ``PEVisionTransformer`` of
    ``--model-size`` geometry.

    Raises:
        ValueError: an unknown encoding or option (from the encoding registry).
    """
    if ':' not in spec:
        names = timm.list_models(f'pe_vit_*_patch16_{spec}_224')
        own = f'pe_vit_{args.model_size}_patch16_{spec}_224'
        if own in names:
            return timm.create_model(own, img_size=args.size, num_classes=1000)
        if names:  # the entrypoint's encoding and options, at this geometry
            return timm.create_model(names[0], img_size=args.size, num_classes=1000, **GEOMETRY[args.model_size])
    kind, _, opts = spec.partition(':')
    try:
        kw = parse_model_kwargs([o for o in opts.split(',') if o])
    except ValueError:
        raise ValueError(f'{spec!r}: encoding options go after the colon as key=value items separated by commas, '
                         f'e.g. comrope:variant=ld,block_size=4') from None
    return PEVisionTransformer(img_size=args.size, patch_size=16, num_classes=1000, pe=kind, pe_kwargs=kw,
                               **GEOMETRY[args.model_size])


def measure(pe: str, args: argparse.Namespace) -> dict:
    """Compile ``pe``'s model once, then ``args.runs`` runs of alternating eager / compiled rounds: per run the median
    of each and their ratio; the row holds the median ratio over the runs and its spread."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build(pe, args).eval()
    compiled = torch.compile(model)
    x = torch.randn(args.batch_size, 3, args.size, args.size)
    clock = time.process_time if args.clock == 'cpu' else time.perf_counter
    runs = []
    with torch.inference_mode():
        t0 = clock()
        compiled(x)
        compile_s = clock() - t0
        for run in range(args.runs):
            for _ in range(args.warmup):
                model(x)
                compiled(x)
            times = {'eager': [], 'compiled': []}
            order = (('eager', model), ('compiled', compiled))
            for _ in range(args.repeats):
                for key, fn in order if run % 2 == 0 else order[::-1]:  # who goes first alternates between runs
                    t0 = clock()
                    fn(x)
                    times[key].append(clock() - t0)
            runs.append({k: statistics.median(v) for k, v in times.items()})
        err = (compiled(x) - model(x)).abs().max().item()
    ratios = [r['compiled'] / r['eager'] for r in runs]
    return dict(pe=pe, eager_ms=1e3 * statistics.median(r['eager'] for r in runs),
                compiled_ms=1e3 * statistics.median(r['compiled'] for r in runs), ratio=statistics.median(ratios),
                ratio_runs=ratios, compile_s=compile_s, max_abs_diff=err)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=None,
                        help='model suffixes (comrope_ld) or kind[:key=value,...]; default: every registered image '
                             'model (any size)')
    parser.add_argument('--model-size', default='tiny', choices=sorted(GEOMETRY))
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--batch-size', type=int, default=4)
    parser.add_argument('--runs', type=int, default=3, help='runs per model (one compilation); median and spread')
    parser.add_argument('--repeats', type=int, default=5, help='timed alternating rounds per run')
    parser.add_argument('--warmup', type=int, default=1, help='untimed rounds per run')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--clock', choices=['cpu', 'wall'], default='cpu',
                        help='cpu = time.process_time (robust to other jobs; with one thread the compute time)')
    parser.add_argument('--out', help='write the markdown table here (and a .json beside it)')
    args = parser.parse_args(argv)
    for name in ('runs', 'repeats'):
        if getattr(args, name) < 1:
            parser.error(f'--{name} {getattr(args, name)}: must be at least 1')
    if args.warmup < 0:
        parser.error(f'--warmup {args.warmup}: must be at least 0')
    known, kinds = set(image_pes()), set(list_pos_encodings())
    for spec in args.pes or []:
        if spec not in known and spec.partition(':')[0] not in kinds:
            parser.error(f'--pes {spec}: not a registered image model suffix ({", ".join(sorted(known))}) nor an '
                         'encoding kind[:key=value,...] (zoo.encodings.registry.list_pos_encodings()); names are '
                         'exact, not patterns')
    pes = args.pes or sorted(known)
    torch.set_num_threads(args.threads)
    started = load()
    rows = []
    for pe in pes:
        try:
            rows.append(measure(pe, args))
        except Exception as err:  # noqa: BLE001  (the table names the failure)
            rows.append(dict(pe=pe, error=f'{type(err).__name__}: {str(err).splitlines()[0][:100]}'))
        print(f'{pe}: {rows[-1]} (load {load()})', file=sys.stderr)
    cpu = platform.processor() or platform.machine()
    lines = [f'CPU ({os.cpu_count()} cores, {args.threads} threads, {cpu}), torch {torch.__version__}, '
             f'timm {timm.__version__}, ViT-{args.model_size[0].upper()}/16 at {args.size} px, batch '
             f'{args.batch_size}, {args.clock} clock; per model one compilation, then {args.runs} runs of '
             f'{args.repeats} alternating rounds after {args.warmup} warm-up round(s); ms are medians over the runs '
             f'of each run\'s median, compiled / eager the median of the runs\' ratios with their spread '
             f'(lowest-highest). Load average (1/5/15 min): {started} at the start, {load()} at the end.', '',
             '| pe | eager ms | compiled ms | compiled / eager (median) | spread | compile s | max abs diff |',
             '|---|---|---|---|---|---|---|']
    for r in rows:
        if 'error' in r:
            lines.append(f'| `{r["pe"]}` | failed: {r["error"]} | | | | | |')
            continue
        lines.append(f'| `{r["pe"]}` | {r["eager_ms"]:.0f} | {r["compiled_ms"]:.0f} | {r["ratio"]:.2f} | '
                     f'{min(r["ratio_runs"]):.2f}-{max(r["ratio_runs"]):.2f} | {r["compile_s"]:.0f} | '
                     f'{r["max_abs_diff"]:.1e} |')
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
