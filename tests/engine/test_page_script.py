"""Whether a page has a script element (`parse_page`'s has_script): the render lane's first
question, answered from the parsed tree in the worker, table by table."""

from __future__ import annotations

import pytest

from atlas_pipeline.parsing import parse_page

URL = "http://a.example.test/"

CASES = [
    ("<html><head><script>draw()</script></head><body><p>x</p></body></html>", True),
    ("<html><body><p>x</p><SCRIPT SRC='/app.js'></SCRIPT></body></html>", True),
    ("<html><body><p>x</p><script type='module' src='/m.js'></script></body></html>", True),
    ("<p>no head or body tags at all</p><script>1</script>", True),
    ("<html><body><p>plain text, no scripts</p></body></html>", False),
    # a comment is not an element, nor is text that only mentions one
    ("<html><body><!-- <script>old()</script> --><p>x</p></body></html>", False),
    ("<html><body><p>write &lt;script&gt; to add one</p></body></html>", False),
    ("<html><body><textarea><script>typed()</script></textarea></body></html>", False),
    ("<html><body><noscript><p>enable JavaScript</p></noscript></body></html>", False),
    ("<html><body><p>x</p><scripts>not html</scripts></body></html>", False),
]


@pytest.mark.parametrize(("html", "expected"), CASES)
def test_has_script(html: str, expected: bool) -> None:
    assert parse_page(html.encode(), URL, None, False)["has_script"] is expected
