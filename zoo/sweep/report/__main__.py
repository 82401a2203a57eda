"""``python -m zoo.sweep.report RESULTS --png PLOT``: redraw a sweep's plots from saved results."""
import sys

from zoo.errors import ZooError
from zoo.sweep.report import replot

try:
    written = replot()
except (ValueError, ZooError) as e:  # a missing or unreadable file, an unwritable plot: one line, status 2
    print(f'python -m zoo.sweep.report: error: {" ".join(str(e).split())}', file=sys.stderr)
    sys.exit(2)
for _name, _path in written.items():
    print(f'{_name}: {_path}')
