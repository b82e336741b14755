"""The hidden fields of an HTML page's forms, as a browser would post them back (login and consent
pages). Standard library only: imported by tests/test_oauth.py and by the scripts run in the mcp 2.x
venv."""
from html.parser import HTMLParser


class HiddenFields(HTMLParser):
    def __init__(self, html: str):
        super().__init__()
        self.fields: dict[str, str] = {}
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "input" and attrs.get("type") == "hidden" and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""
