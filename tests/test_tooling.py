"""Style, types and the layer contracts hold: ruff (lint + format), mypy (strict) and import-linter, as `make lint`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

BIN = Path(sys.executable).parent
RUFF_PATHS = ["."]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(command: list[str]) -> None:
    out = _run(str(BIN / "ruff"), *command, *RUFF_PATHS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_on_models_app_and_worker() -> None:
    out = _run(str(BIN / "mypy"), timeout=600)  # the files and strictness come from pyproject.toml
    assert out.returncode == 0 and "Success" in out.stdout, out.stdout + out.stderr


def test_import_contracts() -> None:
    out = _run(str(BIN / "lint-imports"), "--no-logo")
    assert out.returncode == 0, out.stdout + out.stderr
    kept = [line for line in out.stdout.splitlines() if line.endswith(" KEPT")]
    assert len(kept) >= 5 and "0 broken" in out.stdout, out.stdout
