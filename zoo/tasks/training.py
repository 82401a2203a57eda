"""Training tasks: everything that differs between image, video and video-LLM training, behind one interface.

The training loop (:mod:`zoo.train.loop`) builds, trains, validates, checkpoints, resumes and runs under DDP in one
way; it asks a :class:`TrainingTask` for the rest:

* :meth:`~TrainingTask.create_model`: the model, built from the options (with ``--initial-checkpoint`` /
  ``--tower-checkpoint`` loaded), still on the CPU;
* :meth:`~TrainingTask.open_data`: the training and validation datasets, their collate function, what the classes
  (or benchmark tasks) are, and the data config recorded in the checkpoint;
* :meth:`~TrainingTask.create_task`: the :class:`~zoo.tasks.base.Task` (batch, loss, counts);
* :meth:`~TrainingTask.set_epoch`: what changes in the data every epoch (new random frame offsets);
* :meth:`~TrainingTask.meta`: the checkpoint ``meta`` fields it adds (``img_size``, ``num_frames``, ``class_names``
  or ``benchmark`` + ``tasks`` ...);
* :attr:`~TrainingTask.metric_names`, :attr:`~TrainingTask.samples`, :attr:`~TrainingTask.files` and
  :meth:`~TrainingTask.describe`: how its metrics, samples and inputs are named in the logs.

The tasks: :class:`~zoo.tasks.classification.ImageClassificationTraining`,
:class:`~zoo.tasks.classification.VideoClassificationTraining` (``zoo train``; the model name picks one:
:func:`~zoo.tasks.classification.classification_training`) and :class:`~zoo.tasks.videoqa.VideoQATraining`
(``zoo train-vlm``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from torch import nn
from torch.utils.data import Dataset

from .base import Task

__all__ = ['TrainingData', 'TrainingTask']


@dataclass
class TrainingData:
    """The two splits of a run and how they are batched.

    Attributes:
        train / val: the datasets (the loop wraps them in samplers and loaders).
        collate_fn: the loaders' collate function (``None``: :func:`zoo.datasets.collate_skip_bad`).
        classes: the class names, or the benchmark tasks of a video-QA run.
        data_config: how inputs are made (mean, std, size ...); recorded in the checkpoint as ``data_config``.
        source: the training data, for messages (a folder path).
    """
    train: Dataset
    val: Dataset
    collate_fn: Optional[Callable]
    classes: List[str]
    data_config: Dict[str, Any]
    source: str


class TrainingTask:
    """Interface of a training task; the loop calls only these, in this order: :meth:`create_model`,
    :meth:`open_data`, :meth:`create_task`, then :meth:`set_epoch` every epoch and :meth:`meta` for the checkpoint.

    Args:
        args: the parsed options of the subcommand.

    Attributes:
        metric_names: what ``val_top1`` / ``val_top5`` (``metrics.csv``) mean, as the log lines call them.
        samples: what a sample is called in the logs (``images``, ``clips``, ``questions``).
        files: what an unreadable sample is called in the logs (``image``, ``video``).
    """
    metric_names: Tuple[str, str] = ('top1', 'top5')
    samples: str = 'images'
    files: str = 'image'

    def __init__(self, args: Any):
        self.args = args

    def create_model(self, resuming: bool) -> nn.Module:
        """The model, built from the options, on the CPU (the loop seeded torch before); its initial weights
        (``--initial-checkpoint`` ...) are loaded unless ``resuming`` (the checkpoint's weights replace them)."""
        raise NotImplementedError

    def open_data(self, model: nn.Module) -> TrainingData:
        """Open the training and validation splits for ``model``.

        Raises:
            ValueError / FileNotFoundError: missing or inconsistent data.
        """
        raise NotImplementedError

    def create_task(self, model: nn.Module, data: TrainingData) -> Task:
        """The :class:`Task` that batches, scores and counts (``model`` is on its device now)."""
        raise NotImplementedError

    def set_epoch(self, data: TrainingData, epoch: int) -> None:
        """Prepare the training data for ``epoch`` (0-based); called after the loop reseeded torch."""

    def meta(self, data: TrainingData) -> Dict[str, Any]:
        """The checkpoint ``meta`` fields of this task (beside ``model_name``, ``pe``, ``model_kwargs``,
        ``data_config``, ``args`` and ``world_size``, which the loop records for every task)."""
        raise NotImplementedError

    def describe(self, data: TrainingData) -> str:
        """The input and data part of the run's first log line."""
        return f'{len(data.train)} train / {len(data.val)} val {self.samples}, {len(data.classes)} classes'
