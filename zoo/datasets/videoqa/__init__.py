"""Video question-answering benchmark readers behind one registry (keys: lmms-eval task names).

``load_benchmark(name, root)`` returns :class:`VideoQARecord` s and a :class:`LoadReport` that counts every skipped
row per reason; :class:`VideoQADataset` reads their frames with a fixed protocol. Registered: ``mvbench``,
``videomme``, ``nextqa_mc`` (NExT-QA multiple choice), ``mlvu``, ``longvideobench``, ``egoschema``.
"""
from .common import (BenchmarkFormatError, LoadReport, VideoQARecord, VideoResolver, get_benchmark, list_benchmarks,
                     load_benchmark, probe_records, register_benchmark)
from . import egoschema, imageqa, longvideobench, mlvu, mvbench, nextqa, videomme  # noqa: F401  (registers readers)
from .dataset import VideoQADataset, collate_videoqa

__all__ = ['BenchmarkFormatError', 'LoadReport', 'VideoQARecord', 'VideoResolver', 'VideoQADataset',
           'collate_videoqa', 'get_benchmark', 'list_benchmarks', 'load_benchmark', 'probe_records',
           'register_benchmark']
