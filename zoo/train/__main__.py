"""``python -m zoo.train ...`` (also the entry point for ``torchrun --nproc-per-node N -m zoo.train ...``)."""
import sys

from zoo.cli import main

if __name__ == '__main__':
    sys.exit(main(['train'] + sys.argv[1:]))
