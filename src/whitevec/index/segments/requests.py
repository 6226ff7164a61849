"""What a write is given and what it answers, on every surface: the choices for an id the index holds
(:data:`ON_EXISTING`), the one-line refusal of held ids (:class:`HeldIdsError`), a delete's ids
(:func:`check_ids`), and :class:`AddResult` / :class:`DeleteResult`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from whitevec.errors import BadInputError

ON_EXISTING = ("error", "replace", "skip")  # what an add does with an id the index already holds


def check_on_existing(on_existing: str) -> str:
    key = str(on_existing).strip().lower()
    if key not in ON_EXISTING:
        raise BadInputError(f"unknown on_existing {on_existing!r}; valid: {', '.join(ON_EXISTING)}")
    return key


class HeldIdsError(BadInputError):
    """An add under ``on_existing="error"`` of ids the index holds (``held``, in the order given): nothing is
    written. The message names Python's keywords; :meth:`worded` words it for another surface."""

    def __init__(self, held: list[str], given: int, path: Path) -> None:
        self.held, self.given, self.path = held, given, path
        # Numbers, as a corpus that names no ids gets: the held documents with those ids need not be these at all.
        numbered = all(i.isascii() and i.isdigit() for i in held)
        super().__init__(self.worded('on_existing="replace"', 'on_existing="skip"', maybe_line_numbers=numbered))

    def worded(
        self, replace: str, skip: str, *, line_numbers: bool = False, maybe_line_numbers: bool = False
    ) -> str:
        """The message with ``replace`` and ``skip`` naming the choices; ``line_numbers``: the ids are a plain
        text corpus's line numbers; ``maybe_line_numbers``: they may be numbers a corpus without ids gave."""
        said = (
            f"document id {self.held[0]!r} is already in the index at {self.path} ({len(self.held)} of the "
            f"{self.given} ids given are); nothing was written"
        )
        if not (line_numbers or maybe_line_numbers):
            return (
                f"{said}: give {replace} to put these documents in place of those (their old text is dropped) or "
                f"{skip} to add only the ids the index lacks"
            )
        numbers = sorted(self.held, key=lambda i: (len(i), i))  # as numbers, without int(): ids may be long
        span = f"{numbers[0]}..{numbers[-1]} here"
        cause = (
            f"the ids of a plain text corpus are its line numbers ({span})"
            if line_numbers
            else f"ids such as these ({span}) are what a corpus that names none gets (a plain text file's line "
            "numbers, the documents' numbers in a JSONL, CSV or TSV file without ids)"
        )
        return (
            f"{said}: {cause}, and the index holds those ids already (an earlier corpus's numbers, most likely), "
            f"so {replace} would overwrite those documents with unrelated ones; to add these as new documents, "
            'give each an id (a JSONL corpus with an "id" field, or a CSV or TSV corpus with an id column)'
            + ("" if line_numbers else f"; for the same documents, give {replace} or {skip}")
        )


@dataclass(frozen=True)
class AddResult:
    """What an add did: documents added under new ids, replacing a held one, or skipped (an id held under
    ``on_existing="skip"``, or no token the model knows), and the index's count after it."""

    added: int
    replaced: int
    skipped: int
    count: int


@dataclass(frozen=True)
class DeleteResult:
    """What a delete did: the documents deleted, and the ids given that the index did not hold."""

    deleted: int
    missing: list[str]


def check_ids(ids: Sequence[str]) -> list[str]:
    """The ids of a delete, distinct and in their order; BadInputError for none, or for one not a non-empty string
    (of any type: None is refused as 1 is, never taken for an id the index lacks)."""
    if isinstance(ids, str | bytes):
        raise BadInputError("give a list of document ids, not one string")
    if not isinstance(ids, Iterable):
        raise BadInputError(f"give a list of document ids, not {type(ids).__name__}")
    given = list(ids)
    if not given:
        raise BadInputError("no document ids to delete")
    for doc_id in given:
        if not isinstance(doc_id, str) or not doc_id:
            raise BadInputError(
                f"a document id must be a non-empty string, got {_shown(doc_id)} ({type(doc_id).__name__})"
            )
        if not doc_id.isascii():  # SQLite takes UTF-8 only, which a lone surrogate (\ud800-\udfff) is not
            try:
                doc_id.encode("utf-8")
            except UnicodeEncodeError:
                raise BadInputError(
                    f"document id {_shown(doc_id)} holds a lone surrogate (\\ud800-\\udfff), not text"
                ) from None
    return list(dict.fromkeys(given))


def _shown(value: object, limit: int = 60) -> str:
    """``value``'s repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
