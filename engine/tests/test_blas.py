"""OpenBLAS's own thread pool beside torch's: libgomp's spin shortened before torch loads it, and the
pool sized with torch's threads at every turn of the model thread (docs/engine.md, "Two thread pools")."""

import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

import torch

from coa_engine import attention
from coa_engine.blas import (
    OPENMP_SPIN,
    SYSTEM_BLAS,
    blas_threads,
    elf_needed,
    limit_openmp_spin,
    openblas_pool,
    sgemm,
    torch_links_system_blas,
)
from coa_engine.sampling import pin_threads

ENGINE_ROOT = Path(__file__).resolve().parents[1]
A_POOL, NO_POOL = (lambda: object()), (lambda: None)


class SpinTest(unittest.TestCase):
    def test_the_spin_is_shortened_only_beside_an_openblas_pool(self):
        env: dict[str, str] = {}
        self.assertEqual(limit_openmp_spin(env, A_POOL), str(OPENMP_SPIN))
        self.assertEqual(env, {"GOMP_SPINCOUNT": str(OPENMP_SPIN)})
        env = {}
        self.assertIsNone(limit_openmp_spin(env, NO_POOL))
        self.assertEqual(env, {})

    def test_the_environments_own_settings_are_kept(self):
        env = {"GOMP_SPINCOUNT": "300000"}
        self.assertEqual(limit_openmp_spin(env, A_POOL), "300000")
        env = {"OMP_WAIT_POLICY": "ACTIVE"}
        self.assertIsNone(limit_openmp_spin(env, A_POOL))
        self.assertEqual(env, {"OMP_WAIT_POLICY": "ACTIVE"})

    def test_the_server_sets_it_before_torch_loads(self):
        """libgomp reads the spin count once, when torch loads it: `python -m coa_engine` must set it
        before its first import of torch."""
        code = (
            "import json, os, sys\n"
            "import coa_engine.blas as blas\n"
            "seen = {}\n"
            "limit = blas.limit_openmp_spin\n"
            "def spy(*args, **kwargs):\n"
            "    seen['torch_loaded'] = 'torch' in sys.modules\n"
            "    return limit(*args, **kwargs)\n"
            "blas.limit_openmp_spin = spy\n"
            "import coa_engine.__main__\n"
            "print(json.dumps({**seen, 'spin': os.environ.get('GOMP_SPINCOUNT'), 'pool': blas.openblas_pool() is not None}))\n"
        )
        clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**clean, "PYTHONPATH": str(ENGINE_ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertFalse(result["torch_loaded"])
        self.assertEqual(result["spin"], str(OPENMP_SPIN) if result["pool"] else None)


class TorchsBlasTest(unittest.TestCase):
    """Which BLAS torch calls, read from its library's ELF header before torch loads: a machine may have
    the system OpenBLAS beside a torch that never calls it (a pip wheel), where the engine must neither
    shorten libgomp's spin nor multiply through it."""

    def test_a_librarys_needed_libraries(self):
        try:
            kernels = attention.build()
        except (OSError, subprocess.CalledProcessError) as error:
            self.skipTest(f"no kernels to read: {error}")
        needed = elf_needed(kernels)
        self.assertIn("libgomp.so.1", needed)  # linked with -fopenmp
        self.assertIn("libc.so.6", needed)

    def test_files_that_are_not_elf_are_refused(self):
        with self.assertRaisesRegex(ValueError, "not a 64-bit little-endian ELF"):
            elf_needed(__file__)
        with self.assertRaises(OSError):
            elf_needed(ENGINE_ROOT / "no-such-library.so")

    def test_torch_links_the_system_blas_when_it_loaded_it(self):
        """torch is imported here (above): the system BLAS is mapped into this process exactly where torch
        needs it (the engine loads it only then: `system_openblas`)."""
        maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else None
        if maps is None:
            self.skipTest("no /proc/self/maps")
        if torch_links_system_blas():
            self.assertRegex(maps, r"libblas\.so\.3|openblas")  # the real file's name, as the system links it
        else:
            self.assertNotIn(SYSTEM_BLAS, maps)
            self.assertIsNone(openblas_pool())
            self.assertIsNone(sgemm())


@unittest.skipIf(openblas_pool() is None, "torch's BLAS here is not OpenBLAS with its own pthreads pool")
class PoolTest(unittest.TestCase):
    def test_the_model_threads_count_reaches_openblas(self):
        """`torch.set_num_threads` leaves OpenBLAS's pool as it was; the model thread's turns set both."""
        before = torch.get_num_threads(), blas_threads()
        try:
            pin_threads(1)
            self.assertEqual((torch.get_num_threads(), blas_threads()), (1, 1))
            pin_threads(2)
            self.assertEqual((torch.get_num_threads(), blas_threads()), (2, 2))
        finally:
            pin_threads(before[0])
            openblas_pool().openblas_set_num_threads(before[1])


if __name__ == "__main__":
    unittest.main()
