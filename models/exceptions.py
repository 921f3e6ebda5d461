"""Exceptions of the learner (torch-free, so callers can catch them without importing torch)."""


class TrainingCancelled(Exception):
    """Raised by `NeuRulesClassifier.fit` when the progress callback asked to stop."""
