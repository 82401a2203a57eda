"""The sweep engine and its front ends: ``zoo eval-resolution`` (:mod:`.resolution`), ``zoo eval-frames``
(:mod:`.frames`), ``zoo eval-video`` (:mod:`.videoqa`). One engine (:mod:`.engine`) evaluates models x cells into rows
and resumes interrupted sweeps; one report module (:mod:`.report`) writes every result file and plot."""
from .engine import Sweep, SweepModel, SweepState

__all__ = ['Sweep', 'SweepModel', 'SweepState']
