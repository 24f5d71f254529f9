import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

import torch

from coa_engine import checkpoint
from coa_engine.sampling import SamplingParams
from coa_engine.train import Sequence
from coa_engine.worker import Worker

# Saves constant tensors (every value = the step) in a loop, so a torn save would show as a
# manifest whose files are missing or disagree with its step.
SAVE_LOOP = """
import sys, torch
from coa_engine import checkpoint
step = 0
while True:
    step += 1
    checkpoint.save(sys.argv[1], {"step": step}, {"model": {"w": torch.full((512, 512), float(step))}})
    print(step, flush=True)
"""


class CheckpointTest(unittest.TestCase):
    def test_round_trip_restores_weights_optimizer_and_step(self):
        w = Worker(preset="micro", dtype="fp32", max_seq_len=128)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "mine.txt").write_text("kept")
            w.trainer.sft([Sequence([1, 40, 41, 42], [0, 1, 1, 1])])
            w.save(d)
            w.trainer.sft([Sequence([1, 50, 51, 52], [0, 1, 1, 1])])
            w.save(d)
            states = [p.name for p in Path(d).iterdir() if p.name.startswith("state-")]
            self.assertEqual(len(states), 1, "older states are removed")
            self.assertTrue((Path(d) / "mine.txt").exists(), "other files are left alone")
            loaded = Worker(checkpoint_dir=d, dtype="fp32")
        self.assertEqual((loaded.trainer.step, loaded.preset), (2, "micro"))
        for a, b in zip(w.model.parameters(), loaded.model.parameters()):
            torch.testing.assert_close(a, b, atol=0, rtol=0)
        torch.testing.assert_close(
            w.trainer.optimizer.state_dict()["state"][0]["exp_avg"],
            loaded.trainer.optimizer.state_dict()["state"][0]["exp_avg"],
        )
        params = SamplingParams(max_tokens=8, seed=3)
        self.assertEqual(
            w.sampler.generate([[1, 40]], params)[0].ids, loaded.sampler.generate([[1, 40]], params)[0].ids
        )

    def test_a_save_that_dies_before_commit_leaves_the_previous_one(self):
        with tempfile.TemporaryDirectory() as d:
            checkpoint.save(d, {"step": 1}, {"model": {"w": torch.ones(3)}})
            with mock.patch("coa_engine.checkpoint.os.replace", side_effect=OSError("disk full")):
                with self.assertRaises(OSError):
                    checkpoint.save(d, {"step": 2}, {"model": {"w": torch.full((3,), 2.0)}})
            manifest, tensors = checkpoint.load(d)
            self.assertEqual(manifest["step"], 1)
            self.assertEqual(tensors["model"]["w"].tolist(), [1.0, 1.0, 1.0])
            checkpoint.save(d, {"step": 3}, {"model": {"w": torch.full((3,), 3.0)}})
            steps = sorted(p.name.split("-")[1] for p in Path(d).iterdir() if "state" in p.name)
            self.assertEqual(steps, ["000003"])

    def test_killing_the_process_mid_save_leaves_a_loadable_checkpoint(self):
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        for delay in (0.2, 0.5):
            with self.subTest(delay=delay), tempfile.TemporaryDirectory() as d:
                proc = subprocess.Popen([sys.executable, "-c", SAVE_LOOP, d], stdout=subprocess.PIPE, env=env)
                proc.stdout.readline()  # the first save is complete
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc.stdout.close()
                manifest, tensors = checkpoint.load(d)
                w = tensors["model"]["w"]
                self.assertTrue(torch.all(w == manifest["step"]), "the files match the manifest")
                self.assertGreaterEqual(manifest["step"], 1)

    def test_a_checkpoint_loads_with_a_longer_context_and_the_same_predictions(self):
        w = Worker(preset="micro", dtype="fp32", max_seq_len=64)
        with tempfile.TemporaryDirectory() as d:
            w.save(d)
            longer = Worker(checkpoint_dir=d, dtype="fp32", max_seq_len=256)
        self.assertEqual(longer.max_seq_len, 256)
        ids = [1, 40, 41, 42, 43]
        torch.testing.assert_close(longer.trainer.score([ids]), w.trainer.score([ids]), atol=1e-6, rtol=0)
        self.assertEqual(len(longer.trainer.score([list(range(1, 200))])[0]), 198)

    def test_a_checkpoint_with_other_protocol_tags_is_refused_unless_they_are_named(self):
        # Without `tags` the engine checks against the protocol's own (specials.json): `coa` no longer
        # passes them, so that it can start the engine before loading the protocol.
        w = Worker(preset="micro", dtype="fp32", max_seq_len=64, tags=["<a>", "</a>"])
        with tempfile.TemporaryDirectory() as d:
            w.save(d)
            with self.assertRaisesRegex(ValueError, "tags differ from the protocol's"):
                Worker(checkpoint_dir=d, dtype="fp32")
            self.assertEqual(Worker(checkpoint_dir=d, dtype="fp32", tags=["<a>", "</a>"]).preset, "micro")

    def test_a_missing_manifest_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(FileNotFoundError, "checkpoint.json"):
                checkpoint.load(d)
            (Path(d) / "checkpoint.json").write_text(json.dumps({"format": "other"}))
            with self.assertRaisesRegex(ValueError, "format"):
                checkpoint.load(d)


if __name__ == "__main__":
    unittest.main()
