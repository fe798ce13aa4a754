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
