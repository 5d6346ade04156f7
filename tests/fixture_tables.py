"""Access to the Java-written Hudi tables in ../shared/fixtures/hudi-tables (used as they are, never copied)."""
from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

FIXTURE_DIR = Path(
    os.environ.get("HUDI_FIXTURES", Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "hudi-tables")
)


def running_in_ci() -> bool:
    """CI sets `CI=true` (as GitHub Actions and most CI systems do; `.ci/run` sets it too)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing_fixtures_message() -> str | None:
    """Why the Java fixture tables cannot be used, or None when they are there."""
    if not FIXTURE_DIR.is_dir():
        return f"fixture tables not found at {FIXTURE_DIR} (set HUDI_FIXTURES to their directory)"
    if not any(FIXTURE_DIR.glob("*.zip")):
        return f"no fixture tables (*.zip) in {FIXTURE_DIR}"
    return None


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURE_DIR.glob("*.zip"))


def extract_fixture(name: str, dest: Path) -> Path:
    """Unzip fixture `name` under `dest` and return the table base path (the directory holding `.hoodie/`)."""
    target = dest / name
    if not target.exists():
        with zipfile.ZipFile(FIXTURE_DIR / f"{name}.zip") as zf:
            members = [m for m in zf.namelist() if not m.startswith("__MACOSX/") and not m.endswith(".DS_Store")]
            zf.extractall(target, members=members)
    for hoodie in sorted(target.rglob(".hoodie")):
        if hoodie.is_dir() and "metadata" not in hoodie.parent.parts[len(target.parts):]:
            return hoodie.parent
    raise FileNotFoundError(f"no .hoodie directory in fixture {name}")


def copy_fixture(name: str, cache: Path, dest: Path) -> Path:
    """A private writable copy of fixture `name` (for tests that change the table)."""
    src = extract_fixture(name, cache)
    out = dest / src.name
    shutil.copytree(src, out)
    return out
