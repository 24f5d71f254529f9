"""The byte-level vocabulary of src/model/byte-tokenizer.ts: pad, bos, eos, one token per protocol
tag, then the 256 bytes. The tag list comes from src/protocol (specials.json is its checked-in copy,
kept equal by a test); ids must match the TypeScript tokenizer exactly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NAME = "coa-byte-v1"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS_FILE = Path(__file__).with_name("specials.json")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def default_tags() -> list[str]:
    return json.loads(SPECIALS_FILE.read_text())["tags"]


class ByteTokenizer:
    name = NAME
    eos_id = EOS_ID

    def __init__(self, tags: list[str]):
        self.tags = list(tags)
        self.specials = ["<pad>", "<bos>", "<eos>", *self.tags]
        self.byte_offset = len(self.specials)
        self.vocab_size = self.byte_offset + 256
        self._tag_ids = {t: i for i, t in enumerate(self.specials) if i > EOS_ID}
        # Leftmost match, first alternative winning: the same rule as the TypeScript RegExp.
        self._tag_pattern = re.compile("|".join(re.escape(t) for t in self.tags))
        self._bytes = [b""] * self.byte_offset + [bytes([b]) for b in range(256)]
        for tag, i in self._tag_ids.items():
            self._bytes[i] = tag.encode()

    def to_json(self) -> dict:
        return {"name": self.name, "tags": self.tags}

    def encode(self, text: str) -> list[int]:
        # JS strings turn lone surrogates into U+FFFD when encoded; do the same.
        text = _LONE_SURROGATE.sub("\ufffd", text)
        ids: list[int] = []
        last = 0
        for m in self._tag_pattern.finditer(text):
            ids.extend(self.byte_offset + b for b in text[last : m.start()].encode())
            ids.append(self._tag_ids[m.group()])
            last = m.end()
        ids.extend(self.byte_offset + b for b in text[last:].encode())
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        """The UTF-8 bytes a token contributes to decoded text (none for pad, bos and eos)."""
        return self._bytes[token_id]

    def decode(self, ids: list[int]) -> str:
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary of {self.vocab_size}")
        # A tag starts with "<", which ends any unfinished UTF-8 sequence before it, so decoding the
        # concatenated bytes equals decoding byte runs between tags separately (as the TS side does).
        return b"".join(self._bytes[i] for i in ids).decode("utf-8", errors="replace")
