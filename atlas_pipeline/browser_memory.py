"""How much memory the render lane's browser holds: the proportional set size (PSS) of every
Chromium process below this one, summed.

PSS charges each shared page to the processes sharing it in proportion, so the sum over
Chromium's browser, GPU, utility and renderer processes is what the group costs the machine
(summed RSS counts the shared libraries once per process and reads about twice as high).
Read from /proc (Linux); elsewhere `group_pss` is None and the cap is not enforced.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
BROWSER_COMMS = ("chromium", "chrome", "headless_shell")


def descendants(root: int, proc: Path = PROC) -> list[int]:
    """Every process below `root` (children, their children, ...), from each one's ppid."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # the command name is in parentheses and may hold spaces: the ppid follows the last ')'
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def pss_bytes(pid: int, proc: Path = PROC) -> int:
    """The process's PSS (0 when it is gone or unreadable)."""
    try:
        with (proc / str(pid) / "smaps_rollup").open() as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return 0
    return 0


def browser_pids(pids: Iterable[int], proc: Path = PROC) -> list[int]:
    out = []
    for pid in pids:
        try:
            comm = (proc / str(pid) / "comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith(BROWSER_COMMS):
            out.append(pid)
    return out


def group_pss(root: int | None = None, proc: Path = PROC) -> int | None:
    """PSS of the Chromium processes below `root` (default: this process), summed; None where
    /proc cannot say (not Linux)."""
    if not (proc / "self" / "smaps_rollup").exists():
        return None
    pids = browser_pids(descendants(os.getpid() if root is None else root, proc), proc)
    return sum(pss_bytes(pid, proc) for pid in pids)
