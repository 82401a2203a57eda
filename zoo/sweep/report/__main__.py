"""``python -m zoo.sweep.report RESULTS --png PLOT``: redraw a sweep's plots from saved results."""
import sys

from zoo.errors import ZooError
from zoo.sweep.report import replot

try:
    written = replot()
except ZooError as e:  # a file that cannot be written (read-only folder, full disk): one line
    print(f'python -m zoo.sweep.report: error: {" ".join(str(e).split())}', file=sys.stderr)
    sys.exit(2)
for _name, _path in written.items():
    print(f'{_name}: {_path}')
