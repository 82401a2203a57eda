"""Helpers shared by training and evaluation (train never imports eval, and eval never imports train).

* :mod:`zoo.common.errors`: the user-facing error classes the CLI prints as one line.
* :mod:`zoo.common.io`: atomic writes, checkpoints (``.pth`` and ``.safetensors``), temp-file clean-up.
* :mod:`zoo.common.rundir`: one owner per output directory (a lock file with stale-lock detection).
* :mod:`zoo.common.build`: build a model by name (zoo or plain timm) and load weights into it.
* :mod:`zoo.common.options`: option parsing shared by the subcommands (``--model-kwargs``, devices, AMP dtype).
* :mod:`zoo.common.data`: image folders with ``--class-map`` and clear errors for empty class folders.
* :mod:`zoo.common.metrics`: :class:`EvalCounts` (accuracy counting).
* :mod:`zoo.common.task`: the pluggable per-task part (batch -> loss / metrics), :class:`ImageClassificationTask`.
* :mod:`zoo.common.evaluate`: one evaluation loop over a task.
"""
