"""scripts/ stays findable: every script is in the index scripts/README.md, and every
folder of scripts/figures/ is named after the script that writes it.  Exact: lists
files, runs none."""

from __future__ import annotations

from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
KINDS = ("bench", "studies", "tools")


def _scripts() -> list[Path]:
    return sorted([*SCRIPTS.glob("*.py"), *(p for k in KINDS for p in (SCRIPTS / k).glob("*.py"))])


def test_every_script_has_a_line_in_the_index():
    index = (SCRIPTS / "README.md").read_text()
    missing = [str(p.relative_to(SCRIPTS)) for p in _scripts() if f"`{p.name}`" not in index]
    assert not missing, f"add a line for each to scripts/README.md: {missing}"


def test_scripts_are_sorted_by_kind():
    loose = sorted(p.name for p in SCRIPTS.glob("*.py"))
    assert loose == ["check_imports.py", "check_same_numbers.py"], (
        f"put new scripts in scripts/{{{','.join(KINDS)}}}/: {loose}")


def test_every_figure_folder_is_named_after_a_script():
    stems = {p.stem for p in _scripts()}
    entries = sorted((SCRIPTS / "figures").iterdir())
    assert entries, "scripts/figures/ is empty"
    orphans = [p.name for p in entries if p.name not in stems]
    assert not orphans, f"name each after the script that writes it: {orphans}"
