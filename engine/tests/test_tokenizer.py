import unittest

from .helpers import TOKENIZER


class TokenizerTest(unittest.TestCase):
    def test_layout(self):
        self.assertEqual(TOKENIZER.specials[:3], ["<pad>", "<bos>", "<eos>"])
        self.assertEqual(TOKENIZER.vocab_size, TOKENIZER.byte_offset + 256)

    def test_every_tag_is_one_token_and_partial_tags_are_bytes(self):
        for i, tag in enumerate(TOKENIZER.tags):
            self.assertEqual(TOKENIZER.encode(tag), [3 + i])
        self.assertEqual(TOKENIZER.encode("<thin"), [TOKENIZER.byte_offset + b for b in b"<thin"])

    def test_round_trip(self):
        text = "<plan>naïve 日本 🎉</plan><answer>42</answer><think"
        self.assertEqual(TOKENIZER.decode(TOKENIZER.encode(text)), text)

    def test_lone_surrogates_and_bad_bytes_become_replacement_characters(self):
        self.assertEqual(TOKENIZER.decode(TOKENIZER.encode("a\ud800b")), "a\ufffdb")
        self.assertEqual(TOKENIZER.decode([TOKENIZER.byte_offset + 0xE6, 4]), "\ufffd</think>")

    def test_out_of_range_ids_are_refused(self):
        with self.assertRaisesRegex(ValueError, "outside the vocabulary"):
            TOKENIZER.decode([TOKENIZER.vocab_size])


if __name__ == "__main__":
    unittest.main()
