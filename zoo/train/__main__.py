"""``python -m zoo.train ...`` (also the entry point for ``torchrun --nproc-per-node N -m zoo.train ...``)."""
import sys

from zoo.runs.command import run_command

if __name__ == '__main__':
    from zoo.train.loop import train

    def _train(argv):
        train(argv)
        return 0
    sys.exit(run_command('train', _train, sys.argv[1:]))
