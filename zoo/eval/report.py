"""Alias of :mod:`zoo.sweep.report` (moved in round 3); ``python -m zoo.eval.report`` still replots."""
from zoo.sweep.report import *  # noqa: F401,F403

if __name__ == '__main__':
    from zoo.sweep.report import replot
    for _name, _path in replot().items():
        print(f'{_name}: {_path}')
