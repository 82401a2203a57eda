"""Training: ``zoo train`` / ``python -m zoo.train`` (see :mod:`zoo.train.loop`)."""
from .loop import train

__all__ = ['train']
