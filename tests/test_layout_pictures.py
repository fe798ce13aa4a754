"""docs/tensor-cores.md's pictures are what ptxdsl.layoutdoc draws from the code (python -m ptxdsl.layoutdoc
redraws them), and every picture is on the page."""
from __future__ import annotations

import re

import pytest

from ptxdsl import layoutdoc


def test_the_pictures_are_current():
    text = layoutdoc.page_path().read_text(encoding="utf-8")
    assert layoutdoc.render(text) == text, "docs/tensor-cores.md is stale: run python -m ptxdsl.layoutdoc"
    assert layoutdoc.main(["--check"]) == 0


def test_every_picture_is_on_the_page_once():
    text = layoutdoc.page_path().read_text(encoding="utf-8")
    names = re.findall(r"<!-- picture: ([\w-]+) -->", text)
    assert sorted(names) == sorted(layoutdoc.PICTURES)


def test_a_stale_or_unknown_picture_is_caught():
    text = layoutdoc.page_path().read_text(encoding="utf-8")
    stale = text.replace("0x4000004000010046", "0x4000004000010047")
    assert stale != text and layoutdoc.render(stale) == text
    with pytest.raises(KeyError, match="names no picture"):
        layoutdoc.render("<!-- picture: nonesuch -->\n```text\n```\n<!-- end picture -->")


def _rule_ids() -> set[str]:
    """Every rule id the tensor-core modules raise: rule="..." keywords, and the rule argument of the
    `_broken` (layout.*) and `_fail` (model.*) helpers."""
    import ast
    from pathlib import Path

    root = Path(layoutdoc.__file__).resolve().parent
    ids = set()
    for rel in ("descriptor.py", "fragment.py", "reference/wgmma.py"):
        for node in ast.walk(ast.parse((root / rel).read_text())):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "rule" and isinstance(kw.value, ast.Constant):
                    ids.add(kw.value.value)
            name = getattr(node.func, "id", None)
            if name == "_broken" and isinstance(node.args[3], ast.Constant):
                ids.add("layout." + node.args[3].value)
            if name == "_fail" and isinstance(node.args[0], ast.Constant):
                ids.add("model." + node.args[0].value)
    return ids


def test_every_rule_is_in_the_rules_table():
    text = layoutdoc.page_path().read_text(encoding="utf-8")
    table = text[text.index("## 7. Rules"):]
    listed = set(re.findall(r"`((?:layout|descriptor|fragment)\.[\w-]+)`", table))
    raised = _rule_ids()
    assert {"layout.overlap", "descriptor.swizzle-align", "fragment.pack", "model.bounds"} <= raised
    assert {r for r in raised if not r.startswith("model.")} - listed == set()
    # the enum rules come from one loop over the field names (dtype, swizzle, major)
    assert listed - raised <= {"layout.dtype", "layout.swizzle", "layout.major"}
    assert "`model.*`" in table
