"""Tasks: what differs between image classification, video classification and video QA, for training and evaluation.

A task turns a loader batch into model inputs (:meth:`Task.to_batch`), calls the model (:meth:`Task.forward`), and
gives the loss and the evaluation counts. The training loop (:mod:`zoo.train`) and the evaluation loop
(:func:`evaluate`) call only these methods. A training task (:class:`TrainingTask`) adds what a training run needs
besides: the model built from the options, the data, the checkpoint record and the names in the logs.
"""
from .base import Batch, Task
from .classification import (ImageClassificationTask, ImageClassificationTraining, VideoClassificationTask,
                             VideoClassificationTraining, classification_training)
from .evaluate import evaluate
from .metrics import EvalCounts
from .training import TrainingData, TrainingTask
from .videoqa import VideoQATask, VideoQATraining, format_question

__all__ = ['Batch', 'Task', 'ImageClassificationTask', 'VideoClassificationTask', 'VideoQATask', 'EvalCounts',
           'evaluate', 'format_question', 'TrainingTask', 'TrainingData', 'ImageClassificationTraining',
           'VideoClassificationTraining', 'VideoQATraining', 'classification_training']
