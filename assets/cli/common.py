"""What the commands share: progress bars on a terminal, and a store check that fails in one
line."""

from __future__ import annotations

import os
import sys
from typing import Any

from atlas_pipeline.config import CrawlConfig


def show_progress() -> bool:
    """Bars on a terminal, or when ATLAS_PROGRESS=1 asks for them (logs, tests)."""
    return sys.stderr.isatty() or os.environ.get("ATLAS_PROGRESS") == "1"


def bar(total: int, desc: str, unit: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not show_progress(),
                file=sys.stderr, dynamic_ncols=True, mininterval=0.5)  # fmt: skip


def _check_store(cfg: CrawlConfig) -> None:
    from atlas_pipeline.crawl import Engine

    Engine.from_config(cfg).close()  # an unreachable store fails here, in one line
