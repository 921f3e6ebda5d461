"""Celery app and training tasks; the only package that imports torch at run time (inside the task)."""
