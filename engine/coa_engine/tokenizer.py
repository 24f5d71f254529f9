"""The embedded engine's vocabularies, twins of src/model/byte-tokenizer.ts and bpe-tokenizer.ts.

Both start with pad, bos, eos, one token per protocol tag, then the 256 bytes. The byte tokenizer
stops there. A BPE tokenizer adds merged tokens: merge k joins two existing ids into id
`byte_offset + 256 + k`. Text is first cut at protocol tags, then into pieces by PIECE_PATTERNS
(a word with its leading space, up to three digits, a run of punctuation, whitespace), and merges
never cross a piece. The tag list comes from src/protocol (specials.json is its checked-in copy,
kept equal by a test); ids must match the TypeScript tokenizers exactly.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

NAME = "coa-byte-v1"
BPE_PREFIX = "coa-bpe-v1-"
BPE_V2_PREFIX = "coa-bpe-v2-"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS_FILE = Path(__file__).with_name("specials.json")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# ASCII classes only, so that Python's re and JavaScript's RegExp cut every text the same way.
# v1 joins a digit run to the space before it and cuts it into threes from the left; v2 never joins
# it to what precedes and cuts from the right, as thousands separators do, so a value has the same
# pieces wherever it is written (src/model/byte-tokenizer.ts, PieceScheme).
PIECE_PATTERNS = {
    "v1": re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^A-Za-z0-9 \t\r\n]+|[ \t\r\n]+(?![^ \t\r\n])|[ \t\r\n]+"),
    "v2": re.compile(
        r" ?[A-Za-z]+|[0-9]{1,3}(?=(?:[0-9]{3})*(?![0-9]))| ?[^A-Za-z0-9 \t\r\n]+|[ \t\r\n]+(?![^ \t\r\n])|[ \t\r\n]+"
    ),
}


def default_tags() -> list[str]:
    return json.loads(SPECIALS_FILE.read_text())["tags"]


def bpe_name(tags: list[str], merges: list[list[int]], pieces: str = "v1") -> str:
    """A name that changes whenever an id would mean another token."""
    if pieces == "v1":  # the digest of files written before piece schemes existed
        digest = hashlib.sha256(json.dumps({"tags": tags, "merges": merges}, separators=(",", ":")).encode())
        return BPE_PREFIX + digest.hexdigest()[:12]
    spec = {"tags": tags, "merges": merges, "pieces": pieces}
    return BPE_V2_PREFIX + hashlib.sha256(json.dumps(spec, separators=(",", ":")).encode()).hexdigest()[:12]


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
            self._encode_plain(text[last : m.start()], ids)
            ids.append(self._tag_ids[m.group()])
            last = m.end()
        self._encode_plain(text[last:], ids)
        return ids

    def _encode_plain(self, text: str, out: list[int]) -> None:
        out.extend(self.byte_offset + b for b in text.encode())

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


class BpeTokenizer(ByteTokenizer):
    """Byte-level BPE: the byte tokenizer plus merges learned by `coa distill --tokenizer bpe:<size>`."""

    def __init__(self, tags: list[str], merges: list[list[int]], pieces: str = "v1"):
        super().__init__(tags)
        if pieces not in PIECE_PATTERNS:
            raise ValueError(f"unknown piece scheme {pieces!r}; this engine knows {sorted(PIECE_PATTERNS)}")
        self.pieces = pieces
        self._piece_pattern = PIECE_PATTERNS[pieces]
        self.merges = [list(m) for m in merges]
        first = self.byte_offset + 256
        self.ranks: dict[tuple[int, int], int] = {}
        for k, (a, b) in enumerate(self.merges):
            if not (0 <= a < first + k and 0 <= b < first + k) or a < self.byte_offset or b < self.byte_offset:
                raise ValueError(f"merge {k} joins ids {a} and {b}; only bytes and earlier merges can be joined")
            self.ranks[(a, b)] = k
            self._bytes.append(self._bytes[a] + self._bytes[b])
        self.vocab_size = first + len(self.merges)
        self.name = bpe_name(self.tags, self.merges, pieces)
        self._cache: dict[str, list[int]] = {}

    def to_json(self) -> dict:
        spec = {"name": self.name, "tags": self.tags, "merges": self.merges}
        return spec if self.pieces == "v1" else {**spec, "pieces": self.pieces}

    def _encode_plain(self, text: str, out: list[int]) -> None:
        for piece in self._piece_pattern.findall(text):
            ids = self._cache.get(piece)
            if ids is None:
                ids = self._merge([self.byte_offset + b for b in piece.encode()])
                if len(self._cache) < 200_000:
                    self._cache[piece] = ids
            out.extend(ids)

    def _merge(self, ids: list[int]) -> list[int]:
        """Joins the lowest-ranked adjacent pair everywhere it occurs, until no pair has a rank."""
        first = self.byte_offset + 256
        while len(ids) > 1:
            best = min((self.ranks.get(p, len(self.ranks)) for p in zip(ids, ids[1:])))
            if best == len(self.ranks):
                break
            a, b = self.merges[best]
            joined: list[int] = []
            i = 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == a and ids[i + 1] == b:
                    joined.append(first + best)
                    i += 2
                else:
                    joined.append(ids[i])
                    i += 1
            ids = joined
        return ids


def tokenizer_from_json(spec: dict) -> ByteTokenizer:
    """The tokenizer a checkpoint manifest or tokenizer file describes."""
    if "merges" in spec:
        tok = BpeTokenizer(spec["tags"], spec["merges"], spec.get("pieces", "v1"))
        if spec.get("name") not in (None, tok.name):
            raise ValueError(f"tokenizer is named {spec['name']!r} but its merges make {tok.name!r}")
        return tok
    return ByteTokenizer(spec["tags"])
