"""Limit specs and command building without a server: arguments, durations, bad inputs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redis_ratelimit import Leaky, Period, Slide, Throttle, Token
from redis_ratelimit import commands as cmd
from redis_ratelimit.specs import duration_arg, duration_ms


def test_arguments_of_each_command() -> None:
    assert cmd.limiting("k", Token(10, 1, "1s", step=True)) == ["RL.TOKEN", "k", 10, 1, "1s", "STEP"]
    assert cmd.limiting("k", Period(5, "1d", align="-5h"), cost=2) == [
        "RL.PERIOD",
        "k",
        5,
        "1d",
        "COST",
        2,
        "ALIGN",
        "-5h",
    ]
    assert cmd.limiting("k", Period(5, "1d", align=True)) == ["RL.PERIOD", "k", 5, "1d", "ALIGN"]
    assert cmd.limiting("k", Slide(5, 60_000, buckets=6), ban="1h", dryrun=True) == [
        "RL.SLIDE", "k", 5, 60_000, "BUCKETS", 6, "BAN", "1h", "DRYRUN",
    ]  # fmt: skip
    assert cmd.limiting("k", Leaky(5, 1, "1s", delay=2), wait=0, at=7) == [
        "RL.LEAKY", "k", 5, 1, "1s", "DELAY", 2, "WAIT", 0, "AT", 7,
    ]  # fmt: skip
    assert cmd.all_of([("a", Token(1, 1, "1s")), ("b", Slide(2, "1m"))], costs=[3, 0]) == [
        "RL.ALL", 2, "a", "b", "TOKEN", 1, 1, "1s", "COST", 3, "SLIDE", 2, "1m", "COST", 0,
    ]  # fmt: skip
    assert cmd.acquire("k", 3, "2m", id="w1", wait="5s") == ["RL.ACQUIRE", "k", 3, "2m", "ID", "w1", "WAIT", "5s"]
    assert cmd.throttle("k", 15, 30, 60, 2, dryrun=True) == ["CL.THROTTLE", "k", 15, 30, 60, 2, "DRYRUN"]
    gcra = Throttle(15, 30, 60)
    assert [gcra.command(), *gcra.params(2)] == ["CL.THROTTLE", 15, 30, 60, 2] and gcra.window_ms() is None


def test_durations() -> None:
    assert duration_arg(timedelta(seconds=1.5)) == 1500
    assert duration_arg("1m") == "1m" and duration_arg(250) == 250
    with pytest.raises(TypeError):
        duration_arg(True)
    assert [duration_ms(d) for d in ("1500", "1500ms", "2s", "1M", "24h", "1d", "soon")] == [
        1500, 1500, 2000, 60_000, 86_400_000, 86_400_000, None,
    ]  # fmt: skip
    assert Period(5, "1m").window_ms() == 60_000 and Token(5, 1, "1m").window_ms() == 300_000  # a full refill


def test_bad_all_inputs() -> None:
    with pytest.raises(ValueError, match="at least one"):
        cmd.all_of({})
    with pytest.raises(ValueError, match="2 limits but 1 costs"):
        cmd.all_of({"a": Token(1, 1, 1), "b": Token(1, 1, 1)}, costs=[1])


def test_replies() -> None:
    assert cmd.info(None) is None
    assert cmd.info({b"algorithm": b"slide", b"window_counts": [1, 2]}) == {
        "algorithm": "slide",
        "window_counts": [1, 2],
    }
    assert cmd.info([b"algorithm", b"lease", b"leases", [b"\xff", 5]]) == {"algorithm": "lease", "leases": [b"\xff", 5]}
    refused_never = cmd.throttle_decision([1, 16, 0, -1, 2])
    assert (refused_never.allowed, refused_never.retry_after_ms, refused_never.reset_after_ms) == (False, -1, 2000)
    assert cmd.module_missing(Exception("unknown command 'RL.TOKEN'"), "RL.TOKEN") is not None
    assert cmd.module_missing(Exception("unknown command 'FOO'"), "RL.TOKEN") is None
