"""Markup parsed back into its tags and text, for tests of the HTML SpecScope draws."""

from __future__ import annotations

from html.parser import HTMLParser


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text between them."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text += data


def parsed(markup: str) -> Tags:
    """The tags and text of ``markup``."""
    tags = Tags()
    tags.feed(markup)
    return tags
