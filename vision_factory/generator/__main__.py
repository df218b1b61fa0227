"""python -m vision_factory.generator: re-render vision_factory's own files from the templates.

Run it after editing a template that one of them comes from; test_generator checks they match.
"""

from pathlib import Path

from ..files import write_text
from .package import own_files

ROOT = Path(__file__).resolve().parent.parent.parent

if __name__ == "__main__":
    for path, template, content in own_files():
        write_text(ROOT / path, content)
        print(f"{path} <- templates/{template}")
