"""Time one layer's ``term.rotate(q, k)`` of the rotary-family encodings, the part of the attention an encoding adds.

Usage::

    python benchmarks/rotate_speed.py --out docs/benchmarks/rotate_speed.md
    python benchmarks/rotate_speed.py --pes rope_mixed comrope_ap --batch-size 8 --runs 3

Protocol: the registered ViT-S/16 model of each ``--pes`` suffix at 224 px (eval, ``torch.inference_mode``) builds its
layer-3 term for the 14 x 14 grid with a class token; q and k are ``(B, 6, 197, 64)`` views of one fused ``qkv``
projection (the layout the attention hands to ``rotate``). Terms are timed round-robin (one call each per round) on
the process clock with one thread, ``--repeats`` rounds after one warm-up round, ``--runs`` times in the process; the
page gives each term's median ms per call, and its ratio to ``rope_mixed`` (median and spread over the runs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Dict, List, Tuple

import timm
import torch

import zoo  # noqa: F401  (registers the models)
from zoo.encodings.base import Positions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import command_line, load, machine, write_page  # noqa: E402

PES = ['rope_axial', 'rope_mixed', 'gta', 'comrope_ap', 'comrope_ld', 'liere']


def _rotates(pe: str) -> bool:
    """Whether the layer-3 term of ``pe``'s ViT-S overrides ``AttnTerm.rotate``."""
    from zoo.encodings.base import AttnTerm
    terms = timm.create_model(f'pe_vit_small_patch16_{pe}_224').pe.attn_terms(
        Positions((1, 14, 14), 1, 1), torch.float32, torch.device('cpu'))
    term = terms[3] if terms and len(terms) > 3 else None
    return term is not None and type(term).rotate is not AttnTerm.rotate


def run(args: argparse.Namespace) -> Tuple[List[Dict[str, float]], Dict[str, str]]:
    """Per run: each PE's median seconds per ``rotate(q, k)`` call; and each PE's term class name."""
    heads, dim, tokens = 6, 64, 197
    qkv = torch.randn(args.batch_size, tokens, 3 * heads * dim)
    q, k, _ = qkv.reshape(args.batch_size, tokens, 3 * heads, dim).transpose(1, 2).split(heads, dim=1)
    terms = {}
    with torch.inference_mode():
        for pe in args.pes:
            model = timm.create_model(f'pe_vit_small_patch16_{pe}_224').eval()
            terms[pe] = model.pe.attn_terms(Positions((1, 14, 14), 1, 1), torch.float32, torch.device('cpu'))[3]
        per_run = []
        for _ in range(args.runs):
            times: Dict[str, List[float]] = {pe: [] for pe in args.pes}
            for r in range(1 + args.repeats):
                for pe, term in terms.items():
                    t0 = time.process_time()
                    term.rotate(q, k)
                    if r:
                        times[pe].append(time.process_time() - t0)
            per_run.append({pe: statistics.median(v) for pe, v in times.items()})
    return per_run, {pe: type(term).__name__ for pe, term in terms.items()}


def markdown(per_run: List[Dict[str, float]], names: Dict[str, str], args: argparse.Namespace, started: str) -> str:
    lines = [f'{machine(args)}.', '',
             f'ViT-S/16 at 224 px, batch {args.batch_size}: q, k (B, 6, 197, 64) views of one fused qkv; layer 3\'s '
             f'term; {args.runs} runs in one process, each {args.repeats} round-robin rounds after 1 warm-up round; ms '
             f'is the median over runs of each run\'s median. Load average (1/5/15 min): {started} at the start, '
             f'{load()} at the end.', '',
             '| PE | term | ms per rotate(q, k) | vs rope_mixed (median) | spread |', '|---|---|---|---|---|']
    for pe in args.pes:
        ms = 1e3 * statistics.median(r[pe] for r in per_run)
        if 'rope_mixed' in per_run[0]:
            rel = [r[pe] / r['rope_mixed'] for r in per_run]
            ratio, spread = f'{statistics.median(rel):.1f}', f'{min(rel):.1f}-{max(rel):.1f}'
        else:
            ratio = spread = '-'
        lines.append(f'| `{pe}` | {names[pe]} | {ms:.2f} | {ratio} | {spread} |')
    return '\n'.join(lines) + '\n'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--pes', nargs='+', default=PES, help='suffixes of pe_vit_small_patch16_*_224')
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--repeats', type=int, default=20)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--out', help='write the markdown page here')
    args = parser.parse_args(argv)
    if min(args.batch_size, args.runs, args.repeats, args.threads) < 1:
        parser.error('--batch-size, --runs, --repeats and --threads must be >= 1')
    unknown = [p for p in args.pes if f'pe_vit_small_patch16_{p}_224' not in timm.list_models('pe_vit_small_*')]
    if unknown:
        parser.error(f'no registered model pe_vit_small_patch16_<pe>_224 for {unknown}')
    with torch.inference_mode():
        not_rotary = [p for p in args.pes if not _rotates(p)]
    if not_rotary:
        parser.error(f'{not_rotary}: their attention terms do not rotate q and k (no rotate); this benchmark times '
                     f'the rotary family: {" ".join(PES)}')
    args.clock = 'cpu'
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    started = load()
    per_run, names = run(args)
    page = f'Command: `{command_line("rotate_speed.py", argv)}`\n\n' + markdown(per_run, names, args, started)
    print(page)
    if args.out:
        write_page(args.out, page)


if __name__ == '__main__':
    main()
