"""The asyncio client is the sync one made asynchronous (issue 30: their 31 signatures and
docstrings were written twice and had drifted — ``charge``'s docstrings differed): ``gen_aio.py``
writes ``AsyncRateLimitCommands``'s commands from ``RateLimitCommands``'s, and this test fails
when ``aio.py`` is not what it writes, or when any command's signature or docstring differs."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from redis_ratelimit import AsyncRateLimitCommands, RateLimitCommands

PACKAGE = Path(__file__).resolve().parents[1]


def public(cls: type) -> dict[str, object]:
    return {name: member for name, member in vars(cls).items() if callable(member) and not name.startswith("_")}


def test_aio_is_generated_from_the_sync_client() -> None:
    check = subprocess.run(
        [sys.executable, str(PACKAGE / "gen_aio.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_command_has_the_same_signature_and_docstring() -> None:
    sync, asyncio = public(RateLimitCommands), public(AsyncRateLimitCommands)
    assert sorted(sync) == sorted(asyncio)
    assert len(sync) >= 19
    for name, method in sync.items():
        twin = asyncio[name]
        assert not inspect.iscoroutinefunction(method), name
        assert inspect.iscoroutinefunction(twin), f"{name} is not a coroutine in the asyncio client"
        assert inspect.signature(method) == inspect.signature(twin), name  # type: ignore[arg-type]
        assert inspect.getdoc(method) == inspect.getdoc(twin), name
        assert inspect.getdoc(method), f"{name} has no docstring"


def test_the_check_finds_a_drift(tmp_path: Path) -> None:
    # A copy of the package whose aio.py's charge docstring was edited by hand: --check fails.
    copy = tmp_path / "python"
    (copy / "src/redis_ratelimit").mkdir(parents=True)
    for name in ("client.py", "aio.py"):
        (copy / "src/redis_ratelimit" / name).write_text((PACKAGE / "src/redis_ratelimit" / name).read_text())
    (copy / "gen_aio.py").write_text((PACKAGE / "gen_aio.py").read_text())
    (copy / "pyproject.toml").write_text((PACKAGE / "pyproject.toml").read_text())
    aio = copy / "src/redis_ratelimit/aio.py"
    aio.write_text(aio.read_text().replace("``RL.CHARGE``: take", "``RL.CHARGE``: takes", 1))
    check = subprocess.run(
        [sys.executable, str(copy / "gen_aio.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 1 and "RL.CHARGE" in check.stdout
