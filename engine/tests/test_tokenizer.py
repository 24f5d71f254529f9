import unittest

from coa_engine.tokenizer import BpeTokenizer, bpe_name, tokenizer_from_json

from .helpers import TOKENIZER

O = TOKENIZER.byte_offset
FIRST = TOKENIZER.vocab_size  # the first merged id


def byte(ch: str) -> int:
    return O + ord(ch)


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


class BpeTokenizerTest(unittest.TestCase):
    # " t"+"h" -> " th", then " th"+"e" -> " the", then "a"+"n" -> "an"
    MERGES = [[byte(" "), byte("t")], [FIRST, byte("h")], [FIRST + 1, byte("e")], [byte("a"), byte("n")]]

    def setUp(self):
        self.tok = BpeTokenizer(TOKENIZER.tags, self.MERGES)

    def test_merges_within_pieces_only(self):
        self.assertEqual(self.tok.vocab_size, FIRST + 4)
        self.assertEqual(self.tok.encode(" the"), [FIRST + 2])
        # "<answer>" stays one token; "the" without its space never matches " t".
        ids = self.tok.encode("<answer>the an the</answer>")
        self.assertEqual(ids[0], TOKENIZER.encode("<answer>")[0])
        self.assertEqual(ids[1:4], [byte("t"), byte("h"), byte("e")])
        self.assertIn(FIRST + 3, ids)
        self.assertIn(FIRST + 2, ids)

    def test_round_trip_and_token_bytes(self):
        text = "<plan>the ant, 1917!\n  naïve 🎉</plan> then"
        self.assertEqual(self.tok.decode(self.tok.encode(text)), text)
        self.assertEqual(self.tok.token_bytes(FIRST + 2), b" the")

    def test_name_follows_merges_and_json_round_trips(self):
        self.assertTrue(self.tok.name.startswith("coa-bpe-v1-"))
        self.assertEqual(self.tok.name, bpe_name(TOKENIZER.tags, self.MERGES))
        again = tokenizer_from_json(self.tok.to_json())
        self.assertEqual(again.name, self.tok.name)
        with self.assertRaisesRegex(ValueError, "merges make"):
            tokenizer_from_json({**self.tok.to_json(), "merges": self.MERGES[:-1]})

    def test_merges_must_join_known_ids(self):
        with self.assertRaisesRegex(ValueError, "merge 0 joins"):
            BpeTokenizer(TOKENIZER.tags, [[FIRST, byte("a")]])
        with self.assertRaisesRegex(ValueError, "merge 0 joins"):
            BpeTokenizer(TOKENIZER.tags, [[3, byte("a")]])


if __name__ == "__main__":
    unittest.main()
