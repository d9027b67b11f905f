"""Regression suite: the package as users install it (issue 23, "Artifacts"): the wheel that
``make python-dist`` put in ``dist/`` installs into a fresh venv (no checkout on its path) and
runs the README's client snippet against a real server."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import redis
from conftest import ROOT, Server

from redis_ratelimit import __version__

PACKAGE = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_and_runs_the_readme_snippet(server: Server, raw: redis.Redis, tmp_path: Path) -> None:
    wheel = ROOT / "dist" / f"redis_ratelimit-{__version__}-py3-none-any.whl"
    assert wheel.exists(), f"{wheel} is missing: run make python-dist"
    readme = (PACKAGE / "README.md").read_text()
    assert f"pip install redis_ratelimit-{__version__}-py3-none-any.whl" in readme
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The fresh venv sees the test venv's packages (redis, after its own) but not the checkout.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "test-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, timeout=300
    )
    snippet = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[0]
    snippet = snippet.replace("redis://localhost:6379", server.url)
    program = snippet + "\nprint(type(r).__name__, d.allowed, d.remaining, both.allowed)\n"
    done = subprocess.run(
        [str(python), "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RateLimit", "True", "99", "True"]
    located = subprocess.run(
        [str(python), "-c", "import redis_ratelimit; print(redis_ratelimit.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert str(venv) in located.stdout  # the installed wheel, not the checkout
