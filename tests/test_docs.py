"""The documentation: the site builds with `mkdocs build --strict` (every page in the
navigation, no broken link or anchor), and the README stays a README."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                            "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "user-guide" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check above can fail: the same configuration over a page with a dead link
    (not with --quiet, which hides the warnings strict mode counts)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [nothing](missing.md#nowhere).\n")
    config = (ROOT / "mkdocs.yml").read_text().split("\nnav:")[0]
    (tmp_path / "mkdocs.yml").write_text(config + "\nnav:\n  - Home: index.md\n")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                            "-f", str(tmp_path / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode != 0 and "missing.md" in built.stderr


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert any("schedtune replay" in line for line in first_block)
    assert any("python -m pytest -q" in line for line in first_block)
