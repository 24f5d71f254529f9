"""Device choice, and the same model on a CUDA GPU (those tests skip where torch sees none)."""

import tempfile
import unittest

import torch

from coa_engine.precision import choose_device, choose_dtype
from coa_engine.sampling import CachedDecoder, ModelGate, Sampler, SamplingParams
from coa_engine.train import Sequence, Trainer
from coa_engine.worker import Worker

from .helpers import TOKENIZER, micro_model

HAS_CUDA = torch.cuda.is_available()


class DeviceChoiceTest(unittest.TestCase):
    def test_auto_follows_what_torch_sees(self):
        self.assertEqual(choose_device("auto"), "cuda" if HAS_CUDA else "cpu")
        self.assertEqual(choose_device("cpu"), "cpu")

    def test_bad_or_missing_devices_are_refused(self):
        with self.assertRaisesRegex(ValueError, "auto, cpu or cuda"):
            choose_device("tpu")
        if not HAS_CUDA:
            with self.assertRaisesRegex(ValueError, "no CUDA GPU"):
                choose_device("cuda")

    def test_cpu_worker_reports_its_device(self):
        self.assertEqual(Worker(preset="micro", device="cpu", dtype="fp32").info()["device"], "cpu")


@unittest.skipUnless(HAS_CUDA, "needs a CUDA GPU")
class CudaTest(unittest.TestCase):
    def test_auto_dtype_on_cuda_is_bf16_where_supported(self):
        self.assertEqual(choose_dtype("auto", "cuda")[0], "bf16" if torch.cuda.is_bf16_supported() else "fp32")

    def test_sampled_logprobs_equal_a_forward_pass_on_the_gpu(self):
        model = micro_model().cuda()
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        rows = sampler.generate([[1, 60, 61, 62], [1, 64]], SamplingParams(max_tokens=16, seed=3, ignore_eos=True), n=2)
        scored = Trainer(model, "fp32").score([r.prompt + r.ids for r in rows], 1.0)
        for r, lp in zip(rows, scored):
            for x, y in zip(r.logprobs, lp[len(r.prompt) - 1 :]):
                self.assertAlmostEqual(x, y, delta=1e-3)

    def test_gpu_and_cpu_take_the_same_sft_step(self):
        seqs = [Sequence(ids=[1, 70, 71, 72, 73], mask=[0, 1, 1, 1, 1])]
        losses = []
        for device in ("cpu", "cuda"):
            model = micro_model().to(device)
            losses.append(Trainer(model, "fp32").sft(seqs)["loss"])
        self.assertAlmostEqual(losses[0], losses[1], delta=1e-4)

    def test_a_gpu_checkpoint_reloads_on_the_gpu(self):
        worker = Worker(preset="micro", device="cuda")
        with tempfile.TemporaryDirectory() as folder:
            worker.save(folder)
            again = Worker(checkpoint_dir=folder, device="cuda")
        self.assertEqual(next(again.model.parameters()).device.type, "cuda")
        self.assertEqual(again.info()["device"], "cuda")


if __name__ == "__main__":
    unittest.main()
