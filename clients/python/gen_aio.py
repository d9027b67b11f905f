"""Writes the asyncio client's commands from the sync client's (issue 30: they had drifted).

``src/redis_ratelimit/client.py``'s ``RateLimitCommands`` holds every command method between the
lines ``# -- begin commands`` and ``# -- end commands --``. This script copies that region into
``src/redis_ratelimit/aio.py``'s ``AsyncRateLimitCommands`` (between the same two lines), each
method made a coroutine — ``def`` → ``async def``, and every call that goes to Redis
(``self._send``, ``self._send_to_primaries``, ``self.apply``) awaited — then formats the file
with ruff. Signatures and docstrings are therefore the same in both clients by construction;
only ``_send`` and ``_send_to_primaries`` are written by hand on each side.

    python gen_aio.py           rewrite aio.py
    python gen_aio.py --check   exit 1 (and print a diff) when aio.py is not what this writes

``tests/test_async_generated.py`` runs the check, and compares both classes' signatures and
docstrings.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYNC = HERE / "src/redis_ratelimit/client.py"
ASYNC = HERE / "src/redis_ratelimit/aio.py"
BEGIN = "    # -- begin commands"
END = "    # -- end commands --"
GENERATED_NOTE = (
    "    # -- begin commands: generated from client.py's RateLimitCommands by gen_aio.py (make the\n"
    "    # change there and run `python gen_aio.py`); tests/test_async_generated.py checks it --\n"
)

# Calls that reach Redis, awaited in the asyncio client.
AWAITED = (
    (re.compile(r"(?<![\w.])self\._send\("), "await self._send("),
    (re.compile(r"(?<![\w.])self\._send_to_primaries\("), "await self._send_to_primaries("),
    (re.compile(r"(?<![\w.])self\.apply\("), "await self.apply("),
)


def region(text: str, path: Path) -> tuple[int, int]:
    """The offsets of the line after the begin marker's comment and of the end marker."""
    start = text.find(BEGIN)
    end = text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: no '{BEGIN.strip()}' … '{END.strip()}' region")
    # the begin marker may span several comment lines
    after = start
    for line in text[start:end].splitlines(keepends=True):
        if not line.lstrip().startswith("#"):
            break
        after += len(line)
    return after, end


def asynchronous(methods: str) -> str:
    out = re.sub(r"(?m)^    def (\w+)\(", r"    async def \1(", methods)
    for pattern, replacement in AWAITED:
        out = pattern.sub(replacement, out)
    return out


def ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if not found:
        raise SystemExit("gen_aio.py needs ruff (make python-deps installs it into the venv)")
    return found


def generated() -> str:
    sync = SYNC.read_text()
    start, end = region(sync, SYNC)
    current = ASYNC.read_text()
    a_start, a_end = region(current, ASYNC)
    marker = current.rfind(BEGIN, 0, a_start)
    text = current[:marker] + GENERATED_NOTE + asynchronous(sync[start:end]) + current[a_end:]
    formatted = subprocess.run(
        [ruff(), "format", "--stdin-filename", str(ASYNC), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=HERE,
        check=True,
    )
    return formatted.stdout


def main() -> int:
    text = generated()
    current = ASYNC.read_text()
    if "--check" in sys.argv[1:]:
        if text == current:
            return 0
        sys.stdout.writelines(
            difflib.unified_diff(current.splitlines(True), text.splitlines(True), "aio.py", "generated")
        )
        print("aio.py is not generated from client.py: run `python gen_aio.py`", file=sys.stderr)
        return 1
    if text != current:
        ASYNC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
