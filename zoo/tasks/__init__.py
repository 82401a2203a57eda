"""Tasks: what differs between image classification, video classification and video QA, for training and evaluation.

A task turns a loader batch into model inputs (:meth:`Task.to_batch`), calls the model (:meth:`Task.forward`), and
gives the loss and the evaluation counts. The training loop (:mod:`zoo.train`) and the evaluation loop
(:func:`evaluate`) call only these methods.
"""
from .base import Batch, Task
from .classification import ImageClassificationTask, VideoClassificationTask
from .evaluate import evaluate
from .metrics import EvalCounts
from .videoqa import VideoQATask, format_question

__all__ = ['Batch', 'Task', 'ImageClassificationTask', 'VideoClassificationTask', 'VideoQATask', 'EvalCounts',
           'evaluate', 'format_question']
