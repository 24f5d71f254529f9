"""glibc malloc settings: applied at start, the environment's own settings respected, and freed tensor
memory reused without new pages (the page faults they remove cost more than a decode step's arithmetic
on a virtual machine; docs/engine.md)."""

import ctypes
import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

from coa_engine.allocator import SETTINGS, tune_malloc

ENGINE_ROOT = Path(__file__).resolve().parents[1]


def has_mallopt() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "mallopt")
    except OSError:
        return False


def run_python(code: str, **env: str) -> dict:
    """Runs `code` in a fresh interpreter (malloc settings are per process) and parses its last line."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "COA_ENGINE_MALLOC"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(ENGINE_ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


TUNE = "import json; from coa_engine.allocator import tune_malloc; print(json.dumps(tune_malloc()))"

# Allocates and frees tensors of several sizes between 256 KiB and 8 MiB, as a decode or training step
# does, and counts the page faults of the last 40 rounds after 10 rounds of warm-up.
FAULTS = """
import json, resource, sys, torch
from coa_engine.allocator import tune_malloc
tune_malloc()
sizes = [65536, 1 << 20, 262144, 2 << 20, 131072, 524288, 3 << 19]
def round_():
    kept = [torch.ones(n) for n in sizes]      # 256 KiB .. 8 MiB each, every page written
    del kept[::2]
    more = [torch.ones(n) for n in reversed(sizes)]
    return sum(t.numel() for t in kept + more)
for _ in range(10):
    round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
floats = sum(round_() for _ in range(40))
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"faults": faults, "pages": floats * 4 // 4096}))
"""


@unittest.skipUnless(has_mallopt(), "needs glibc's mallopt")
class MallocSettingsTest(unittest.TestCase):
    def test_applies_every_setting(self):
        state = run_python(TUNE)
        self.assertTrue(state["tuned"])
        self.assertEqual(state["applied"], {name: value for name, (_, _, value) in SETTINGS.items()})

    def test_leaves_a_setting_given_in_glibcs_environment_variable(self):
        state = run_python(TUNE, MALLOC_TOP_PAD_="0")
        self.assertEqual(state["from_env"], {"top_pad": "0"})
        self.assertEqual(set(state["applied"]), {"trim_threshold", "mmap_threshold"})

    def test_opt_out_leaves_glibcs_defaults(self):
        state = run_python(TUNE, COA_ENGINE_MALLOC="glibc")
        self.assertEqual(state, {"tuned": False, "reason": "COA_ENGINE_MALLOC=glibc"})

    def test_freed_tensor_memory_is_reused_without_new_pages(self):
        counted = run_python(FAULTS)
        # 40 rounds write ~366k pages; glibc's defaults fault on ~104k of them here, reused memory on
        # almost none.
        self.assertGreater(counted["pages"], 300_000)
        self.assertLess(counted["faults"], counted["pages"] // 100, counted)

    def test_state_reports_what_was_done_in_this_process(self):
        state = tune_malloc({"COA_ENGINE_MALLOC": "glibc"})
        self.assertFalse(state["tuned"])


if __name__ == "__main__":
    unittest.main()
