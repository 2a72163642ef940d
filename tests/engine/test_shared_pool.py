"""An extraction pool per process (issue 16, part 5): batches share it instead of starting
workers each time (seconds of CPU per worker), and a process that used it still exits on
its own, with no worker left: in the main process and in a ProcessPoolExecutor's worker,
where atexit does not run and a live pool used to keep the process from exiting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from atlas_pipeline.extractor_pool import shared_pool
from tests.engine.test_parser_isolation import page

REPO = Path(__file__).resolve().parents[2]


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_batches_of_a_process_share_one_pool() -> None:
    pool = shared_pool(1, 10.0, 0)
    pool.submit(page(3), "http://a.test/1", None, True).result(timeout=60)
    workers = pool.worker_pids()
    again = shared_pool(1, 10.0, 0)
    again.submit(page(4), "http://a.test/2", None, True).result(timeout=60)
    assert again is pool and again.worker_pids() == workers != []
    assert shared_pool(1, 20.0, 0) is not pool  # other limits, another pool
    pool.close()  # a closed pool is replaced, not handed out
    fresh = shared_pool(1, 10.0, 0)
    assert fresh is not pool and not fresh.closed
    fresh.close()
    assert _gone(workers[0])


SCRIPT = """
import multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor

def parse_in_worker():
    from atlas_pipeline.extractor_pool import shared_pool
    from tests.engine.test_parser_isolation import page
    pool = shared_pool(1, 10.0, 0)
    pool.submit(page(3), "http://a.test/", None, True).result(timeout=60)
    return pool.worker_pids()

if __name__ == "__main__":
    where = sys.argv[1]
    if where == "executor":
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            pids = ex.submit(parse_in_worker).result(timeout=120)
    else:
        pids = parse_in_worker()
    print(" ".join(map(str, pids)), flush=True)
"""


def _exits_leaving_no_worker(where: str, tmp_path: Path) -> None:
    script = tmp_path / "uses_pool.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(script), where], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # it hung (the failure this guards against): take its executor worker down with it
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, err
    pids = [int(p) for p in out.split()]
    assert pids and all(_gone(pid) for pid in pids)


def test_a_process_that_used_the_pool_exits_and_leaves_no_worker(tmp_path: Path) -> None:
    _exits_leaving_no_worker("main", tmp_path)


def test_an_executor_worker_that_used_the_pool_exits_too(tmp_path: Path) -> None:
    """Without the finalizer the executor's worker joins its extraction worker forever at
    exit, and the `with` block above never ends (the subprocess times out)."""
    _exits_leaving_no_worker("executor", tmp_path)


LEAN = """
import sys
import deltalake, polars, pyarrow, sqlalchemy  # the engine's libraries, as a run's main has them
from atlas_pipeline.extractor_pool import shared_pool
from tests.engine.test_parser_isolation import page

if __name__ == "__main__":
    pool = shared_pool(1, 10.0, 0)
    pool.submit(page(3), "http://a.test/", None, True).result(timeout=60)
    maps = open(f"/proc/{pool.worker_pids()[0]}/maps").read()
    print(sorted(lib for lib in ("polars", "libarrow", "deltalake", "sqlalchemy") if lib in maps))
    print(sys.modules["__main__"].__file__ == __file__)  # the parent's main is back
    pool.close()
"""


def test_a_worker_loads_the_parsers_and_not_the_engine(tmp_path: Path) -> None:
    """An extraction worker maps none of the engine's libraries, whatever its parent's main
    module imports (spawn imports it again in the child) and although it imports
    atlas_pipeline: they were 150 MiB of each worker's RSS."""
    script = tmp_path / "lean.py"
    script.write_text(LEAN)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, text=True,
                         capture_output=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["[]", "True"], res.stdout
