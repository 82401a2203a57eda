"""``python -m zoo.sweep.report RESULTS --png PLOT``: redraw a sweep's plots from saved results."""
from zoo.sweep.report import replot

for _name, _path in replot().items():
    print(f'{_name}: {_path}')
