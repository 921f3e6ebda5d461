"""Fault injection for the NeuRules service: its own PostgreSQL, Redis, API and worker processes, a bounded
predict load, and the measurements of benchmarks/faults.py and tests/e2e/test_faults.py (one machinery)."""
