"""``private_folder``: what a killed ``rescale`` or ``state`` command leaves in the temp folder goes with the next one.

The processes are real: a folder named with the pid of a process that was SIGKILLed goes, one of a process that
still runs stays, and another command's folders are never looked at.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path

from spark_checkpoint_runtime.working_copy import private_folder


def test_the_next_command_removes_the_folders_of_killed_ones_only(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = subprocess.Popen(["sleep", "60"])
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    running = subprocess.Popen(["sleep", "60"])
    try:
        left = tmp_path / f"rescale-orders-p{killed.pid}-abc123"
        (left / "spark" / "state").mkdir(parents=True)
        (left / "spark" / "state" / "1.delta").write_bytes(b"state")
        busy = tmp_path / f"rescale-orders-p{running.pid}-def456"
        busy.mkdir()
        other = tmp_path / f"state-orders-p{killed.pid}-ghi789"  # another command's: left for it
        other.mkdir()
        with private_folder("rescale-orders") as folder:
            mine = Path(folder)
            assert mine.is_dir() and mine.name.startswith(f"rescale-orders-p{os.getpid()}-")
            assert oct(mine.stat().st_mode & 0o777) == "0o700"
            assert not left.exists(), "a killed rescale's folder outlived the next rescale"
            assert busy.is_dir() and other.is_dir()
        assert not mine.exists()
        with private_folder("state-orders"):
            assert not other.exists()
    finally:
        running.kill()
        running.wait()
