"""The ``zoo`` command line: ``zoo list | demo | train | eval-resolution``.

User errors (missing data, unknown model, incompatible checkpoint, bad sizes, existing output dir) print one
message and exit with status 2, without a traceback; set ``ZOO_DEBUG=1`` to see the traceback.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, List, Optional

__all__ = ['main']


def _cmd_list(args: argparse.Namespace) -> int:
    from zoo.models.catalog import model_catalog
    rows = model_catalog(args.pattern)
    if not rows:
        print(f'no registered model matches {args.pattern!r}', file=sys.stderr)
        return 2
    width = max(len(r['name']) for r in rows)
    fam = max(len(r['family']) for r in rows)
    print(f'{"model":<{width}}  {"PE family":<{fam}}  {"params":>8}  pretrained tags')
    for r in rows:
        tags = ', '.join(r['pretrained']) or '-'
        print(f'{r["name"]:<{width}}  {r["family"]:<{fam}}  {r["params"] / 1e6:7.2f}M  {tags}')
    return 0


def _cmd_train(argv: List[str]) -> int:
    from zoo.train.loop import train
    train(argv)
    return 0


def _cmd_eval_resolution(argv: List[str]) -> int:
    from zoo.eval.resolution import eval_resolution
    result = eval_resolution(argv)
    print(f'report: {result["paths"]["md"]}\nplot:   {result["paths"]["png"]}')
    return 0


def _cmd_demo(argv: List[str]) -> int:
    from zoo.demo import demo
    demo(argv)
    return 0


# Subcommands with their own full parsers (zoo.train.args, zoo.eval.resolution, zoo.demo): argv goes to them as is.
_DELEGATED = {
    'train': (_cmd_train, 'train or fine-tune a model on an image folder (zoo train --help)'),
    'eval-resolution': (_cmd_eval_resolution, 'zero-shot accuracy across input sizes, with a report and a plot'),
    'demo': (_cmd_demo, 'train 3 tiny PE models on bundled CIFAR-10 images and print a resolution report (~2 min)'),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='zoo', description='Position-encoding model zoo for vision transformers.')
    sub = parser.add_subparsers(dest='command', required=True)
    p = sub.add_parser('list', help='print every registered model with its PE family, size and pretrained tags')
    p.add_argument('pattern', nargs='?', default='pe_vit_*', help='wildcard filter (default: pe_vit_*)')
    p.set_defaults(func=_cmd_list)
    for name, (_, help_text) in _DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _user_errors() -> tuple:
    from zoo.models import CheckpointMismatchError
    return ValueError, FileNotFoundError, NotADirectoryError, PermissionError, CheckpointMismatchError


def _run_delegated(name: str, func: Callable[[List[str]], int], argv: List[str]) -> int:
    """Run a subcommand; user errors become one message on stderr and exit status 2 (``ZOO_DEBUG=1``: traceback)."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter('%(message)s'))
    root = logging.getLogger('zoo')
    if not root.handlers:
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        return func(argv)
    except _user_errors() as e:
        if os.environ.get('ZOO_DEBUG'):
            raise
        print(f'zoo {name}: error: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f'zoo {name}: interrupted', file=sys.stderr)
        return 130


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _DELEGATED:
        return _run_delegated(argv[0], _DELEGATED[argv[0]][0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
