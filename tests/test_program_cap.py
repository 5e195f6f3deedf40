"""Never a dead process from too many programs: XLA:CPU gives every loaded program JIT code
mappings, and a process that runs out of them cannot load another. torchtpu keeps at most
TORCHTPU_MAX_LOADED_PROGRAMS loaded (least recently used unloaded first); this drives a process
far past a small cap (program_cap.py, in a subprocess so that the cap is its own)."""

import json
import os
import subprocess
import sys


def test_programs_past_the_cap_are_unloaded_and_come_back(tmp_path):
    env = dict(os.environ, TORCHTPU_MAX_LOADED_PROGRAMS="8", TORCHTPU_CACHE_DIR=str(tmp_path))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "program_cap.py")
    p = subprocess.run(
        [sys.executable, script], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert p.returncode == 0, p.stderr[-4000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["right"], got
    assert got["compiles"] >= 100, got  # the run really went far past the cap
    assert got["peak"] <= got["cap"] and got["loaded"] <= got["cap"], got
    assert got["reloaded"] > 0, got  # unloaded programs came back from the persistent cache
