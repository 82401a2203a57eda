"""zoo in lmms-eval (optional extra ``zoo[lmms]``): zoo's video-LLMs as an lmms-eval model and zoo's video-QA data as
lmms-eval tasks, offline.

* The model ``--model zoo`` (:class:`zoo.integrations.lmms_eval.model.ZooVideoLLM`) is registered through the
  entry-point group ``lmms_eval.models`` (``pyproject.toml``: ``zoo = "zoo.integrations.lmms_eval:model_manifest"``);
  ``--model_args pretrained=RUN_OR_CHECKPOINT_OR_pe_vlm_NAME,max_frames_num=N[,frame_size=PX]``.
* The tasks ship as YAML in this package (:func:`task_dir`; ``--include_path $(python -m zoo.integrations.lmms_eval
  tasks)``): ``zoo_<benchmark>`` answers with zoo's protocol (MVBench segment-midpoint frames inside the question's
  window, zoo's prompt, zoo's answer reader; equal to ``zoo eval-video``) and ``zoo_<benchmark>_lmms`` with
  lmms-eval's (frames spread over the whole video, lmms-eval's MVBench prompt and extraction). The data root of each
  benchmark comes from an environment variable (:data:`ROOT_VARIABLES`), read by zoo's own readers
  (:func:`zoo.datasets.videoqa.load_benchmark`): no hub access.

Nothing here imports lmms-eval until lmms-eval itself loads the model or a task; the modules that need it raise one
line naming the extra when it is missing (:func:`zoo.errors.require`).

lmms-eval: "LMMs-Eval: Reality Check on the Evaluation of Large Multimodal Models" (arXiv:2407.12772).
"""
from __future__ import annotations

import os

__all__ = ['model_manifest', 'task_dir', 'ROOT_VARIABLES', 'BENCHMARKS', 'require_lmms_eval']

#: zoo task name -> (zoo.datasets.videoqa reader, environment variable holding its data root). ``synthetic`` reads
#: the MVBench layout that ``zoo make-videoqa`` writes.
BENCHMARKS = {
    'synthetic': ('mvbench', 'ZOO_LMMS_SYNTHETIC_ROOT'),
    'mvbench': ('mvbench', 'ZOO_LMMS_MVBENCH_ROOT'),
    'videomme': ('videomme', 'ZOO_LMMS_VIDEOMME_ROOT'),
    'nextqa_mc': ('nextqa_mc', 'ZOO_LMMS_NEXTQA_MC_ROOT'),
    'mlvu': ('mlvu', 'ZOO_LMMS_MLVU_ROOT'),
    'longvideobench': ('longvideobench', 'ZOO_LMMS_LONGVIDEOBENCH_ROOT'),
    'egoschema': ('egoschema', 'ZOO_LMMS_EGOSCHEMA_ROOT'),
}
#: the environment variable of each task's data root
ROOT_VARIABLES = {name: env for name, (_, env) in BENCHMARKS.items()}


def require_lmms_eval(purpose: str):
    """Import ``lmms_eval`` or raise :class:`zoo.errors.MissingDependencyError` naming ``pip install 'zoo[lmms]'``."""
    from zoo.errors import require
    return require('lmms_eval', purpose)


def task_dir() -> str:
    """The folder of the shipped task YAMLs, for lmms-eval's ``--include_path``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'tasks')


def model_manifest():
    """The ``lmms_eval.models`` entry point: the ``zoo`` model as an lmms-eval ``ModelManifest`` (a simple model)."""
    require_lmms_eval('the lmms-eval model "zoo"')
    from lmms_eval.models.registry_v2 import ModelManifest
    return ModelManifest(model_id='zoo', simple_class_path='zoo.integrations.lmms_eval.model.ZooVideoLLM')
