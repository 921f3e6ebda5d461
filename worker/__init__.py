"""Celery tasks, the composition root (`worker.service`) and `neurules-admin` (`worker.cli`).

The only package that imports torch at run time (inside the training task).
"""
