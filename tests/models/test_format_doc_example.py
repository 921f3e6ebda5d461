"""The example document of docs/rulelist-format.md is a valid rule list that decides as its text says (a README
probe: it named a feature it did not declare, so both `RuleList.from_dict` and the import refused it, and its rule
could never hold)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from models.rulelist import RuleList

DOC = Path(__file__).resolve().parents[2] / "docs" / "rulelist-format.md"


def test_the_documented_example_reads_and_its_rule_can_decide() -> None:
    block = re.search(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    rl = RuleList.from_dict(json.loads(block.group(1)))
    assert rl.to_dict()["rules"][0]["probabilities"] == [0.168, 0.832]
    holds = {"age": 50, "smoker": 1.0, "workclass": "Private", "thal": "reversable"}
    assert rl.explain(holds)["rule_id"] == 1
    assert rl.explain({**holds, "smoker": 0.0})["rule_id"] == 0
    assert "smoker = 1" in rl.to_text()
