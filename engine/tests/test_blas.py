"""OpenBLAS's own thread pool beside torch's: libgomp's spin shortened before torch loads it, and the
pool sized with torch's threads at every turn of the model thread (docs/engine.md, "Two thread pools")."""

import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

import torch

from coa_engine.blas import OPENMP_SPIN, blas_threads, limit_openmp_spin, openblas_pool
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
