"""The request fields' checks (api.py): a prompt's forms, and the entry a bad one names."""

import unittest

from coa_engine.api import BadRequest, prompts

from .helpers import TOKENIZER


class PromptTest(unittest.TestCase):
    def test_the_forms_of_a_prompt(self):
        vocab = TOKENIZER.vocab_size
        self.assertEqual(prompts([1, 5, vocab - 1], TOKENIZER), [[1, 5, vocab - 1]])
        self.assertEqual(prompts([[1, 2], [3]], TOKENIZER), [[1, 2], [3]])
        self.assertEqual(prompts("ab", TOKENIZER), [TOKENIZER.encode("ab")])

    def test_a_bad_id_is_named_by_its_place(self):
        vocab = TOKENIZER.vocab_size
        for prompt, message in (
            ([1, True], "prompt[0][1] = True is not a token id"),
            ([1, -1], "prompt[0][1] = -1 is not a token id"),
            ([1, vocab], f"prompt[0][1] = {vocab} is not a token id in [0, {vocab})"),
            ([[1, 2], [3, 2.0]], "prompt[1][1] = 2.0 is not a token id"),
            ([1, 2.0], "prompt[0] must be a list of token ids"),
            ([], "prompt must be a string, a list of token ids"),
            ([[1], []], "prompt[1] is empty"),
        ):
            with self.subTest(prompt=prompt), self.assertRaises(BadRequest) as caught:
                prompts(prompt, TOKENIZER)
            self.assertIn(message, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
