"""What an OAuth client test needs beside the SDK: the hidden fields of the login and consent
pages' forms (as a browser posts them back) and a token storage held in memory. Standard library
only: imported by tests/test_oauth.py and by the scripts run in the mcp 2.x venv."""
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


class MemoryStorage:
    """The client's TokenStorage: what it registered and the tokens it holds."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info
