import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src" / "worker" / "python"))


def write(tmp_path, name, text):
    """The text, dedented, as file ``name`` under ``tmp_path``."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path
