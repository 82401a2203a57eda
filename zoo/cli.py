"""The ``zoo`` command line (thin: parse, call, print one-line errors): ``zoo list | demo | train | train-vlm |
eval-resolution | eval-frames | eval-video | make-videos | make-videoqa | make-imageqa``.

User errors (missing data, unknown model, incompatible checkpoint, bad sizes, an output dir in use or holding another
run, a full or read-only disk) print one message and exit with status 2, without a traceback; set ``ZOO_DEBUG=1`` to
see the traceback.

Adding a subcommand: write ``func(argv: List[str]) -> int`` (its own argparse parser inside) and add one line to
:data:`SUBCOMMANDS`.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Dict, List, Optional, Tuple

__all__ = ['main']


def _cmd_list(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(
        prog='zoo list', description='Registered zoo models with their PE family, size and pretrained tags. '
                                     'PATTERN is a timm-style wildcard matched against model names and PE names.',
        epilog="Examples: zoo list rope_mixed | zoo list '*tiny*' | zoo list 'pe_vit_small_*' | zoo list '*'")
    parser.add_argument('pattern', nargs='*', default=['*'], help='wildcards (default: every zoo model)')
    args = parser.parse_args(argv)
    from zoo.models.catalog import list_pe_names, model_catalog
    rows = model_catalog(args.pattern)
    if not rows:
        print(f'zoo list: no zoo model or position encoding matches {" ".join(args.pattern)!r}; PE names: '
              f'{", ".join(list_pe_names())} (wildcards as in timm: \'*tiny*\', \'pe_vit_*\')', file=sys.stderr)
        return 2
    width = max(len(r['name']) for r in rows)
    pe = max(len(r['pe']) for r in rows)
    fam = max(len(r['family']) for r in rows)
    print(f'{"model":<{width}}  {"PE":<{pe}}  {"PE family":<{fam}}  {"params":>8}  pretrained tags')
    for r in rows:
        tags = ', '.join(r['pretrained']) or '-'
        print(f'{r["name"]:<{width}}  {r["pe"]:<{pe}}  {r["family"]:<{fam}}  {r["params"] / 1e6:7.2f}M  {tags}')
    return 0


def _call(module: str, func: str, status: bool = False) -> Callable[[List[str]], int]:
    """A subcommand that imports ``module`` only when run and calls ``func(argv)`` (its exit status when ``status``,
    else 0)."""
    def run(argv: List[str]) -> int:
        out = getattr(importlib.import_module(module), func)(argv)
        return out if status else 0
    return run


def _sweep(name: str, module: str, func: str) -> Callable[[List[str]], int]:
    """A sweep subcommand: prints where the report is; status 1 when an evaluation failed (listed in the report)."""
    def run(argv: List[str]) -> int:
        result = getattr(importlib.import_module(module), func)(argv)
        paths = result['paths']
        print(f'report: {paths["md"]}\nplot:   {paths.get("png", "-")}')
        if result['failed']:
            print(f'zoo {name}: {result["failed"]} evaluation(s) failed; see "Failed evaluations" in {paths["md"]}',
                  file=sys.stderr)
            return 1
        return 0
    return run


# name -> (function taking the subcommand's argv, help line). Each subcommand has its own full parser.
SUBCOMMANDS: Dict[str, Tuple[Callable[[List[str]], int], str]] = {
    'list': (_cmd_list, 'zoo models by timm-style wildcard over model and PE names (zoo list rope_mixed)'),
    'train': (_call('zoo.train.loop', 'train'),
              'train or fine-tune a model on an image or video folder (zoo train --help)'),
    'train-vlm': (_call('zoo.train.vlm', 'train_vlm'),
                  'train a video-LLM pe_vlm_* on MVBench-style video QA (zoo train-vlm --help)'),
    'eval-resolution': (_sweep('eval-resolution', 'zoo.sweep.resolution', 'eval_resolution'),
                        'zero-shot accuracy across input sizes, with a report and a plot'),
    'eval-frames': (_sweep('eval-frames', 'zoo.sweep.frames', 'eval_frames'),
                    'video models: zero-shot accuracy across clip lengths x frame sizes (heatmaps)'),
    'eval-video': (_sweep('eval-video', 'zoo.sweep.videoqa', 'eval_video'),
                   'video-LLMs: multiple-choice video QA accuracy across frame counts (+ V-NIAH)'),
    'search-longrope': (_call('zoo.sweep.search_longrope', 'main', status=True),
                        'LongRoPE: search per-frequency rescale factors for --extrapolation longrope=FILE'),
    'make-videos': (_call('zoo.datasets.synthetic_video', 'main', status=True),
                    'write a labelled synthetic video set (real MP4s; direction, order, speed)'),
    'make-videoqa': (_call('zoo.datasets.synthetic_videoqa', 'main', status=True),
                     'write a synthetic video-QA set (MVBench JSON + MP4s, incl. V-NIAH)'),
    'make-imageqa': (_call('zoo.datasets.synthetic_imageqa', 'main', status=True),
                     'write a synthetic high-resolution image-QA set for tiled images (which tile holds the object)'),
    'demo': (_call('zoo.demo', 'demo'),
             'train tiny PE models on bundled CIFAR-10 images and clips, print the reports (~2 min)'),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='zoo', description='Position-encoding model zoo for vision transformers.')
    sub = parser.add_subparsers(dest='command', required=True)
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        from zoo.runs.command import run_command
        return run_command(argv[0], SUBCOMMANDS[argv[0]][0], argv[1:])
    build_parser().parse_args(argv)  # prints usage / help, or the error for an unknown subcommand
    return 2


if __name__ == '__main__':
    sys.exit(main())
