"""Drafted continuations for speculative decoding: the ids that followed a row's last few ids before.

Much of what an agent model writes it has seen already: a name copied from the question, a value
copied from an observation, and the protocol's fixed phrases, which every episode writes in much the
same words. `NgramDrafter` proposes, for a row's last `n` ids, the ids that followed them at their
latest earlier occurrence in the row's own context (prompt and completion), else in the completion
of a row that finished before. The sampler feeds the drafted ids through the model in the same step
as the row's next id and keeps the prefix that sampling agrees with (`Sampler`): a draft changes how
many ids a step yields, never which ids.

On the demo's 200 greedy test episodes a row yields 2.6 ids per step with drafts of up to 4 ids, and
the evaluation ran ~10% faster (docs/engine.md, "Speculative decoding").
"""

from __future__ import annotations

from collections import OrderedDict

# Ids that select a draft: 3 was best on the demo's episodes (2 drafts more often and wrongly, 4 less often).
NGRAM = 3
# Ids drafted per row and step at most (the engine's --draft-tokens); 0 turns speculative decoding off.
DEFAULT_DRAFT_TOKENS = 4
# Learned n-grams kept from finished rows (oldest dropped first); ~200 bytes each.
MAX_LEARNED = 200_000


class RowContext:
    """One row's prompt and generated ids, and where each of its n-grams last started (only those
    with an id after them, so that the row's own last n-gram never finds itself)."""

    __slots__ = ("ids", "starts", "indexed")

    def __init__(self, prompt: list[int]):
        self.ids = list(prompt)
        self.starts: dict[tuple[int, ...], int] = {}
        self.indexed = 0  # n-grams starting before this have been entered in `starts`


class NgramDrafter:
    def __init__(self, max_tokens: int, n: int = NGRAM, max_learned: int = MAX_LEARNED):
        if max_tokens < 0 or n < 1:
            raise ValueError("drafts need max_tokens >= 0 and n >= 1")
        self.max_tokens, self.n, self.max_learned = max_tokens, n, max_learned
        self._learned: OrderedDict[tuple[int, ...], tuple[int, ...]] = OrderedDict()

    @property
    def learned(self) -> int:
        return len(self._learned)

    def propose(self, row: RowContext, limit: int) -> list[int]:
        """At most `limit` (and `max_tokens`) ids that may follow `row`'s ids; [] when none is known."""
        limit = min(limit, self.max_tokens)
        ids, n = row.ids, self.n
        if limit <= 0 or len(ids) < n:
            return []
        # Enter the n-grams that gained a successor since the last call (each id once per row), later
        # starts replacing earlier ones; zipped shifted slices rather than a slice per start: a turn's
        # first call indexes its whole prompt (~500 ids in the demo's evaluation).
        first, end = row.indexed, len(ids) - n
        if first < end:
            grams = zip(*(ids[first + i : end + i] for i in range(n)))
            row.starts.update(zip(grams, range(first, end)))
            row.indexed = end
        key = tuple(ids[-n:])
        start = row.starts.get(key)
        if start is not None:
            # Past the row's end the draft continues from itself: ids that repeated with some period
            # go on repeating with it.
            draft: list[int] = []
            for p in range(start + n, start + n + limit):
                draft.append(ids[p] if p < len(ids) else draft[p - len(ids)])
            return draft
        learned = self._learned.get(key)
        return list(learned[:limit]) if learned else []

    def continued(self, row: RowContext, prompt: list[int], shared: int) -> RowContext:
        """A context for `prompt`, whose first `shared` ids are `row`'s (a later turn whose prompt
        extends a finished row's ids: a prefix-cache hit). It takes `row`'s index where that covers only
        n-grams within those ids (with the id after each), so that its first `propose` indexes only the
        ids past them: indexing a turn's whole prompt again at its first step was ~0.3 ms a turn, 0.28 s
        of the demo's evaluation (docs/engine.md). Taken, not copied: a later prompt continuing `row`
        indexes its own, as every prompt did before."""
        new = RowContext(prompt)
        if row.indexed + self.n <= shared:
            new.starts, new.indexed = row.starts, row.indexed
            row.starts, row.indexed = {}, 0
        return new

    def learn(self, row: RowContext, generated: int) -> None:
        """Keeps the n-grams of a finished row's last `generated` ids (with the n before them), each with
        the ids that followed it, for rows that come later."""
        if not self.max_tokens:
            return
        ids, n, learned = row.ids, self.n, self._learned
        for s in range(max(0, len(ids) - generated - n), len(ids) - n):
            key = tuple(ids[s : s + n])
            learned[key] = tuple(ids[s + n : s + n + self.max_tokens])
            learned.move_to_end(key)
        while len(learned) > self.max_learned:
            learned.popitem(last=False)
