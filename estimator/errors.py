"""The estimator's exceptions. Each message names the bad value and what is accepted."""

from __future__ import annotations


class EstimatorError(ValueError):
    """Base class: the input cannot be estimated (never a crash of the caller)."""


class UnknownModel(EstimatorError):
    """The model name has no cached features (run schedtune features MODEL)."""


class UnknownGPU(EstimatorError):
    """The GPU product or type is not in the catalogue."""


class InvalidJob(EstimatorError):
    """Task, batch size or another job field is out of range."""


class DataMissing(EstimatorError):
    """The reference data directory or one of its files is missing."""


class ArtefactError(EstimatorError):
    """A trained artefact is missing, corrupt, or was saved by other library versions."""
