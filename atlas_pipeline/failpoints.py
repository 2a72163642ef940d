"""Named crash points for crash-recovery tests; inert unless ATLAS_FAILPOINTS is set.

    ATLAS_FAILPOINTS="after_response=5:kill"    SIGKILL this process (its group if it leads
                                                one) at the 5th time the point is reached
    ATLAS_FAILPOINTS="after_claim=3:raise"      raise InjectedFault there instead
    ATLAS_FAILPOINTS="before_send=3:stall"      block the calling thread (the event loop)
                                                for STALL_S at every 3rd time instead
    ATLAS_FAILPOINTS_DIR=/some/dir              fire each point once per directory, across
                                                processes and retries (a marker file per point)

Points: after_claim, before_send, after_response, after_commit, before_lake_write,
mid_delta_write.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

from .errors import AtlasError

ENV = "ATLAS_FAILPOINTS"
DIR_ENV = "ATLAS_FAILPOINTS_DIR"
POINTS = frozenset(
    {
        "after_claim",
        "before_send",
        "after_response",
        "after_commit",
        "before_lake_write",
        "mid_delta_write",
    }
)


ACTIONS = frozenset({"kill", "raise", "stall"})
STALL_S = 0.5  # how long a `stall` blocks: a loop busy with a slow callback, as in the field


class InjectedFault(AtlasError):
    """A failpoint set to `raise` was reached."""


def _parse(spec: str) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        name, _, rest = item.partition("=")
        count, _, action = rest.partition(":")
        if name not in POINTS or action not in ACTIONS or not count.isdigit() or count == "0":
            raise AtlasError(f"{ENV}: bad entry {item!r}; write <point>=<n>:kill|raise|stall, "
                             f"points: {', '.join(sorted(POINTS))}")  # fmt: skip
        out[name] = (int(count), action)
    return out


_SPECS = _parse(os.environ.get(ENV, ""))
_hits: Counter[str] = Counter()


def hit(name: str) -> None:
    """Reached point `name`: fire if configured for this hit."""
    if not _SPECS or name not in _SPECS:
        return
    _hits[name] += 1
    count, action = _SPECS[name]
    if action == "stall":
        if _hits[name] % count == 0:
            time.sleep(STALL_S)
        return
    if _hits[name] != count or not _first_time(name):
        return
    if action == "raise":
        raise InjectedFault(f"failpoint {name} (hit {count})")
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)  # with the extraction workers, like a crash
    os.kill(os.getpid(), signal.SIGKILL)


def _first_time(name: str) -> bool:
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return True
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).touch(exist_ok=False)
    except FileExistsError:
        return False
    return True
