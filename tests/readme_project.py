"""A brand-new project (`django-admin startproject`) wired up with the code blocks of the README's "Use it
in your project", for the tests that follow those steps (tests/test_first_hour.py, tests/test_packaging.py)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_block(containing: str, language: str = "python") -> str:
    """The README's one code block in `language` that contains `containing`, dedented."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(rf"^ *```{language}\n(.*?)^ *```", text, re.S | re.M)
    [block] = [b for b in blocks if containing in b]
    indent = min(len(line) - len(line.lstrip()) for line in block.splitlines() if line.strip())
    return "\n".join(line[indent:] for line in block.splitlines()) + "\n"


def apply_readme_settings(project: Path):
    """Step 1's settings, as a reader applies a block with `...` in it to startproject's settings.py:
    daphne first and the apps last in INSTALLED_APPS, WhiteNoise right after SecurityMiddleware,
    ASGI_APPLICATION and STATIC_ROOT as written. No CHANNEL_LAYERS, no ALLOWED_HOSTS: what the README
    does not ask for stays as startproject made it."""
    readme = readme_block('ASGI_APPLICATION = "myproject.asgi.application"')
    assert 'INSTALLED_APPS = ["daphne", ..., "channels", "mcp_transport", "myapp"]' in readme
    assert ('    "django.middleware.security.SecurityMiddleware",\n'
            '    "whitenoise.middleware.WhiteNoiseMiddleware",\n    ...\n]') in readme
    assigned = [line for line in readme.splitlines() if re.match(r"(ASGI_APPLICATION|STATIC_ROOT) = ", line)]
    assert len(assigned) == 2, readme

    settings = project / "myproject" / "settings.py"
    text = settings.read_text()
    apps = re.search(r"INSTALLED_APPS = \[\n(.*?)\]", text, re.S)
    text = text.replace(apps.group(0), f'INSTALLED_APPS = [\n    "daphne",\n{apps.group(1)}    "channels",\n'
                                       '    "mcp_transport",\n    "myapp",\n]')
    text, added = re.subn(r"^( *)(['\"])django\.middleware\.security\.SecurityMiddleware\2,\n",
                          lambda m: m.group(0) + f'{m.group(1)}"whitenoise.middleware.WhiteNoiseMiddleware",\n',
                          text, flags=re.M)
    assert added == 1, text
    settings.write_text(text + "\n" + "\n".join(assigned) + "\n")
