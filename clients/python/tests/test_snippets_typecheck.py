"""Regression suite: every Python block of the README and every example under examples/python/
passes ``mypy --strict`` (issue 23, "Typing"), on the newest redis-py (the test venv's) and the
oldest supported one (``RL_PY_REDIS_OLDEST``: its sources, installed by ``make python-deps``).

redis-py's own untyped functions (``execute_command``) are excluded from the untyped-call check
(``untyped_calls_exclude``), and its sources' own errors are not ours (``ignore_errors``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import ROOT

PACKAGE = Path(__file__).resolve().parents[1]
CONFIG = "[mypy]\nstrict = True\nuntyped_calls_exclude = redis\n\n[mypy-redis.*]\nignore_errors = True\n"


def readme_snippets() -> List[str]:
    text = (PACKAGE / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def redis_versions() -> List[str]:
    return ["newest", "oldest"]


@pytest.mark.parametrize("redis_py", redis_versions())
def test_readme_and_examples_pass_mypy_strict(redis_py: str, tmp_path: Path) -> None:
    snippets = readme_snippets()
    assert len(snippets) >= 3
    files = []
    for i, code in enumerate(snippets):
        f = tmp_path / f"readme_{i}.py"
        f.write_text(code)
        files.append(str(f))
    files += sorted(str(p) for p in (ROOT / "examples/python").glob("*.py"))
    (tmp_path / "mypy.ini").write_text(CONFIG)
    path = [str(PACKAGE / "src")]
    if redis_py == "oldest":
        oldest = Path(os.environ.get("RL_PY_REDIS_OLDEST", ROOT / "target/clients-python-redis-5.3.1"))
        assert (oldest / "redis/py.typed").exists(), f"{oldest} is missing: run make python-deps"
        path.insert(0, str(oldest))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), "--no-incremental", *files],
        env={**os.environ, "MYPYPATH": os.pathsep.join(path)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
