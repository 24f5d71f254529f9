"""glibc malloc settings: applied at start, the environment's own settings respected, and a freed block
kept in the heap for reuse (the page faults that saves cost more than a decode step's arithmetic on a
virtual machine; docs/engine.md)."""

import ctypes
import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

from coa_engine.allocator import SETTINGS, huge_pages, tune_malloc

ENGINE_ROOT = Path(__file__).resolve().parents[1]


def libc_has(symbol: str) -> bool:
    try:
        return hasattr(ctypes.CDLL(None), symbol)
    except OSError:
        return False


def run_python(code: str, **env: str) -> dict:
    """Runs `code` in a fresh interpreter (malloc settings are per process) and parses its last line."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k not in ("COA_ENGINE_MALLOC", "GLIBC_TUNABLES")
    }
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

# A 24 MiB block, written, freed: is it served from the heap (not a private mapping, which free
# unmaps and the next block faults in again) and does the heap keep it after free? Reads glibc's own
# counters (mallinfo2), in an interpreter without torch, so nothing else has moved glibc's thresholds.
BLOCK = """
import ctypes, json
from coa_engine.allocator import tune_malloc
tune_malloc()
libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 24 << 20
before = libc.mallinfo2()
block = libc.malloc(size)
ctypes.memset(block, 1, size)
during = libc.mallinfo2()
libc.free(block)
after = libc.mallinfo2()
mapped = during.hblks - before.hblks
print(json.dumps({"mapped": mapped, "heap_after_free": after.arena, "size": size}))
"""


@unittest.skipUnless(libc_has("mallopt"), "needs glibc's mallopt")
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

    @unittest.skipUnless(libc_has("mallinfo2"), "needs glibc 2.33's mallinfo2")
    def test_a_freed_block_stays_in_the_heap_for_reuse(self):
        tuned, default = run_python(BLOCK), run_python(BLOCK, COA_ENGINE_MALLOC="glibc")
        self.assertEqual(tuned["mapped"], 0)  # from the heap, not a mapping of its own
        self.assertGreaterEqual(tuned["heap_after_free"], tuned["size"])  # and kept after free
        # What the settings change: glibc's defaults map such a block and unmap it on free.
        self.assertEqual(default["mapped"], 1)
        self.assertLess(default["heap_after_free"], default["size"])

    def test_state_reports_what_was_done_in_this_process(self):
        state = tune_malloc({"COA_ENGINE_MALLOC": "glibc"})
        self.assertFalse(state["tuned"])


# 24 MiB from the tuned heap, written: how much of this process's memory is in transparent huge pages?
HUGE = """
import ctypes, json
from coa_engine.allocator import tune_malloc
tune_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
size = 24 << 20
ctypes.memset(libc.malloc(size), 1, size)
kb = [int(line.split()[1]) for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages:")]
print(json.dumps({"huge_kb": kb[0]}))
"""


def transparent_huge_pages() -> str | None:
    """The kernel's transparent huge page mode (always, madvise, never), or None where it has none."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else None


def glibc_at_least(major: int, minor: int) -> bool:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return False
    parts = version.removeprefix("glibc ").split(".")
    return len(parts) >= 2 and (int(parts[0]), int(parts[1])) >= (major, minor)


class HugePagesTest(unittest.TestCase):
    def test_reports_the_tunable_the_process_started_with(self):
        given = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"}
        self.assertEqual(huge_pages(given), "1")
        self.assertIsNone(huge_pages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}))
        self.assertIsNone(huge_pages({}))

    @unittest.skipUnless(
        transparent_huge_pages() == "madvise" and glibc_at_least(2, 35) and Path("/proc/self/smaps_rollup").exists(),
        "needs the kernel's madvise mode of transparent huge pages and glibc 2.35's hugetlb tunable",
    )
    def test_the_tunable_puts_the_heap_in_huge_pages(self):
        """What coa's launcher sets (src/model/engine-process.ts) does what it is for: the heap's memory
        comes in 2 MiB pages, one fault each, where without it the kernel leaves it in 4 KiB pages."""
        plain = run_python(HUGE)["huge_kb"]
        huge = run_python(HUGE, GLIBC_TUNABLES="glibc.malloc.hugetlb=1")["huge_kb"]
        self.assertEqual(plain, 0)
        # Here all 24 MiB (24,576 kB); at least one 2 MiB page anywhere (a machine whose memory is too
        # fragmented to find more falls back to small pages, as the kernel allows).
        self.assertGreaterEqual(huge, 2 << 10)


if __name__ == "__main__":
    unittest.main()
