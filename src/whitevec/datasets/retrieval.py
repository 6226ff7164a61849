"""Retrieval data: documents, corpus files, and test collections (Cranfield, BEIR-style folders).

Corpus files (``read_corpus_file``), picked by extension. Every value is kept as written or the file is
refused with a ``BadInputError`` naming the file and line; nothing is dropped or altered silently, except that
a document's text is stripped of surrounding white space. An id is kept exactly as written: one that is empty or
begins or ends with white space is refused (:data:`ID_RULE`, the rule of every write on every surface), so the
id a delete gives later is the very one the index holds.

- ``.jsonl`` / ``.ndjson`` / ``.json``: one JSON object a line with ``"text"`` (string, required) and ``"id"``
  (string or integer, optional: the 1-based number of the document among non-blank lines when absent; then
  ``"_id"``, the BEIR name, is tried too; when both are given, ``"id"`` names the document and ``"_id"`` stays
  in the metadata). ``"title"`` (string or null), when not blank, is prepended to the text
  (``title + " " + text``), as BEIR does. Every other key goes into the document's ``metadata``. Refused:
  a non-string title, a key repeated in one object, ``NaN``/``Infinity`` or a number too large for a float
  (strict JSON parsers reject what ``search --json`` would print), a string with a lone surrogate escape
  (``"\\ud800"``, which cannot be stored as UTF-8), nesting too deep to parse.
- ``.csv`` (comma) / ``.tsv`` (TAB): a header row naming a ``text`` column and optionally an ``id`` column
  (any case); other columns become metadata (strings, keyed by their header names with case kept); a column
  named twice (ignoring case) is refused. CSV follows normal quoting, strictly: a quoted field may span lines
  and keeps its line breaks, and a quote never closed or text after a closing quote is an error. TSV is read
  with quoting off, so quotes are ordinary characters. Fields of any length are read.
- anything else (``.txt``): one document a line, blank lines skipped; ids are the 1-based line numbers in the
  file, as strings.

Test collections give ``RetrievalDataset(name, corpus, queries, qrels)``: ``qrels[query_id][doc_id] = gain``,
a non-negative integer where 0 is "judged not relevant" and a larger gain means more relevant. The graded
gains feed nDCG; every gain > 0 counts as relevant for recall, MRR and MAP. In BEIR qrels a negative score
(some sets mark harmful documents so) is gain 0; a (query, document) pair judged twice with different
scores is refused. BEIR queries keep only their text: other keys of ``queries.jsonl`` are not used. A judged
query (a Cranfield query) with blank text is refused, naming its id: it cannot be searched.

Cranfield gain mapping (cranqrel.readme, Cleverdon's codes): code 1 "complete answer" -> gain 4, 2 "high
degree of relevance" -> 3, 3 "useful background" -> 2, 4 "minimum interest" -> 1; code -1 (one line per query,
unexplained in the readme) and 5 "no interest" -> gain 0, i.e. not relevant. ``cran.qry`` numbers its queries
001, 002, 004, ... while ``cranqrel`` numbers them 1..225 in order, so the n-th query in ``cran.qry`` gets id
``str(n)``. A document's text is its ``.W`` body (which starts with the title in this collection); two
documents (471, 995) have an empty body and no title, and are kept with empty text so the collection stays at
1400 documents.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import existing_file, read_lines, resolve_data_dir
from whitevec.datasets.rows import bad_row, header_columns, json_object, read_delimited_file
from whitevec.errors import BadInputError, DataNotFoundError

CRANFIELD_GAIN = {1: 4, 2: 3, 3: 2, 4: 1, 5: 0, -1: 0}


@dataclass
class Document:
    """One document of a corpus: a unique string id, its text, and optional JSON-serialisable metadata."""

    id: str
    text: str
    metadata: dict[str, Any] | None = None


@dataclass
class RetrievalDataset:
    """A test collection: documents, queries ``{id: text}`` (file order), judgments ``{qid: {did: gain}}``."""

    name: str
    corpus: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def judged_queries(self) -> dict[str, str]:
        """The queries that have at least one relevant document (gain > 0): the ones evaluated."""
        return {q: t for q, t in self.queries.items() if any(g > 0 for g in self.qrels.get(q, {}).values())}


# --- generic corpus files ----------------------------------------------------------------------------------
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_DELIMITED_SUFFIXES = (".csv", ".tsv")


def is_text_corpus(path: str | os.PathLike[str]) -> bool:
    """Whether :func:`read_corpus_file` reads ``path`` as plain text: one document a line, its id the line's
    number."""
    return Path(path).suffix.lower() not in (*_JSONL_SUFFIXES, *_DELIMITED_SUFFIXES)


def read_corpus_file(path: str | os.PathLike[str]) -> list[Document]:
    """Read a corpus file (JSONL, CSV, TSV or plain text; see the module docstring) into documents.

    Raises:
        DataNotFoundError: the file does not exist.
        BadInputError: a row is malformed (file and line named), an id repeats, or the file holds no documents.
    """
    file = existing_file(path, "corpus file")
    suffix = file.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        docs = _read_jsonl_corpus(file)
    elif suffix in _DELIMITED_SUFFIXES:
        docs = read_delimited_corpus(file, "," if suffix == ".csv" else "\t")
    else:
        docs = text_lines_corpus(read_lines(file, BadInputError))
    if not docs:
        raise BadInputError(f"corpus file {file} holds no documents")
    check_unique_ids(docs, where=str(file))
    return docs


def check_unique_ids(docs: list[Document], where: str = "the corpus") -> None:
    """Raise BadInputError naming the first id that occurs twice."""
    seen: set[str] = set()
    for doc in docs:
        if doc.id in seen:
            raise BadInputError(f"document id {doc.id!r} occurs more than once in {where}; ids must be unique")
        seen.add(doc.id)


# The one rule for a document id, on every write of every surface: ids are kept exactly, so the id a delete names
# later is the one the index holds (a reader that stripped it, or a delete that did, would name another).
ID_RULE = "an id is a non-empty string with no white space at either end (ids are kept exactly)"


def is_exact_id(doc_id: object) -> bool:
    """Whether ``doc_id`` is a document id by :data:`ID_RULE`."""
    return isinstance(doc_id, str) and bool(doc_id) and doc_id == doc_id.strip()


def _id_value(value: Any, file: Path, line_no: int) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise bad_row(file, line_no, f"id {value!r} must be a string or an integer")
    text = str(value)
    if not is_exact_id(text):
        raise bad_row(file, line_no, f"id {text!r}: {ID_RULE}" if text else "empty id")
    return text


def text_lines_corpus(lines: list[str], first_line: int = 1) -> list[Document]:
    """Documents of a plain text corpus, one a non-blank line; ``first_line``: the file line of ``lines[0]``
    (ids are file line numbers)."""
    return [Document(str(i), line.strip()) for i, line in enumerate(lines, start=first_line) if line.strip()]


def _read_jsonl_corpus(file: Path) -> list[Document]:
    return jsonl_corpus(file, read_lines(file, BadInputError))


def jsonl_corpus(file: Path, lines: list[str], first_line: int = 1, first_doc: int = 0) -> list[Document]:
    """Documents of JSON lines read from ``file``: ``lines[0]`` is line ``first_line`` of the file and
    ``first_doc`` documents come before it (default ids number the documents of the whole file)."""
    docs: list[Document] = []
    for line_no, line in enumerate(lines, start=first_line):
        if not line.strip():
            continue
        row = json_object(line, file, line_no, "a 'text' field")
        text = row.pop("text", None)
        if not isinstance(text, str):
            raise bad_row(file, line_no, "field 'text' is missing or not a string")
        title = row.pop("title", None)
        if title is not None and not isinstance(title, str):
            raise bad_row(file, line_no, f"title {title!r} must be a string or null (it is prepended to the text)")
        if title and title.strip():
            text = f"{title.strip()} {text}"
        # "id" names the document; "_id" (BEIR's name) only when "id" is absent, else it is plain metadata.
        id_key = "id" if "id" in row else "_id" if "_id" in row else None
        doc_id = str(first_doc + len(docs) + 1) if id_key is None else _id_value(row.pop(id_key), file, line_no)
        docs.append(Document(doc_id, text.strip(), row or None))
    return docs


def read_delimited_corpus(file: Path, delimiter: str) -> list[Document]:
    rows = read_delimited_file(file, delimiter)
    if not rows:
        return []
    header_no, first = rows[0]
    header = header_columns(file, header_no, first)
    lowered = [name.lower() for name in header]
    if "text" not in lowered:
        raise bad_row(file, header_no, "the header must name a 'text' column (and optionally 'id')")
    text_col = lowered.index("text")
    id_col = lowered.index("id") if "id" in lowered else None
    docs: list[Document] = []
    for line_no, row in rows[1:]:
        if len(row) != len(header):
            raise bad_row(file, line_no, f"{len(row)} columns, the header has {len(header)}")
        doc_id = str(len(docs) + 1) if id_col is None else _id_value(row[id_col], file, line_no)
        meta = {name: row[i] for i, name in enumerate(header) if i not in (text_col, id_col)}
        docs.append(Document(doc_id, row[text_col].strip(), meta or None))
    return docs


# --- Cranfield ---------------------------------------------------------------------------------------------
def _smart_records(lines: list[str]) -> list[tuple[str, dict[str, str]]]:
    """SMART dot-field records: ``[(".I" number, {field letter: text})]``; repeated fields are concatenated."""
    records: list[tuple[str, dict[str, str]]] = []
    current: dict[str, list[str]] | None = None
    number = ""
    active = ""
    for line in lines:
        if line.startswith(".I"):
            if current is not None:
                records.append((number, {k: " ".join(v).strip() for k, v in current.items()}))
            number, current, active = line[2:].strip(), {}, ""
        elif len(line) >= 2 and line[0] == "." and line[1].isalpha() and line[2:].strip() == "":
            active = line[1]
            if current is not None:
                current.setdefault(active, [])
        elif current is not None and active:
            current[active].append(line.strip())
    if current is not None:
        records.append((number, {k: " ".join(v).strip() for k, v in current.items()}))
    return records


def read_cranfield(folder: str | os.PathLike[str]) -> RetrievalDataset:
    """Read Cranfield 1400 from ``cran.all.1400``, ``cran.qry`` and ``cranqrel`` (see the module docstring)."""
    root = Path(folder).expanduser()
    files = {name: root / name for name in ("cran.all.1400", "cran.qry", "cranqrel")}
    for name, file in files.items():
        if not file.is_file():
            raise DataNotFoundError(f"Cranfield file {name} not found in {root}")
    corpus = []
    for number, fields in _smart_records(read_lines(files["cran.all.1400"], BadInputError)):
        text = fields.get("W") or fields.get("T") or ""
        corpus.append(Document(number, " ".join(text.split()), {"title": " ".join(fields.get("T", "").split())}))
    queries: dict[str, str] = {}
    for position, (_, fields) in enumerate(_smart_records(read_lines(files["cran.qry"], BadInputError)), 1):
        queries[str(position)] = " ".join(fields.get("W", "").split())
    check_query_texts(queries, files["cran.qry"])
    qrels: dict[str, dict[str, int]] = {}
    for line_no, line in enumerate(read_lines(files["cranqrel"], BadInputError), start=1):
        parts = line.split()
        if not parts:
            continue
        try:
            qid, did, code = parts[0], parts[1], int(parts[2])
        except (IndexError, ValueError):
            raise BadInputError(f"{files['cranqrel']}, line {line_no}: expected 'query doc code'") from None
        if code not in CRANFIELD_GAIN:
            raise BadInputError(f"{files['cranqrel']}, line {line_no}: unknown relevance code {code}")
        qrels.setdefault(str(int(qid)), {})[str(int(did))] = CRANFIELD_GAIN[code]
    notes = [
        "gain = 5 - code for codes 1..4 (1 = complete answer -> 4); code -1 -> 0 (not relevant)",
        "queries numbered by position in cran.qry (cranqrel uses 1..225)",
    ]
    return RetrievalDataset("cranfield", corpus, queries, qrels, source=str(root), notes=notes)


# --- BEIR --------------------------------------------------------------------------------------------------
def read_beir(folder: str | os.PathLike[str], split: str = "test") -> RetrievalDataset:
    """Read a BEIR-style folder: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
    ``text``) and ``qrels/{split}.tsv`` (header ``query-id corpus-id score``; score is the gain)."""
    root = Path(folder).expanduser()
    corpus_file, query_file = root / "corpus.jsonl", root / "queries.jsonl"
    qrel_file = root / "qrels" / f"{split}.tsv"
    for file in (corpus_file, query_file, qrel_file):
        if not file.is_file():
            raise DataNotFoundError(f"BEIR folder {root} lacks {file.relative_to(root)}")
    corpus = _read_jsonl_corpus(corpus_file)
    check_unique_ids(corpus, where=str(corpus_file))
    query_docs = _read_jsonl_corpus(query_file)
    check_unique_ids(query_docs, where=str(query_file))
    all_queries = {d.id: d.text for d in query_docs}
    qrels: dict[str, dict[str, int]] = {}
    for line_no, fields in read_delimited_file(qrel_file, "\t"):
        if line_no == 1 and not _is_number(fields[-1]):
            continue  # the header row, "query-id corpus-id score"
        if len(fields) != 3:
            raise bad_row(
                qrel_file, line_no, f"expected query-id, corpus-id, score, found {len(fields)} column(s)"
            )
        qid, did, score = (f.strip() for f in fields)
        try:
            gain = max(int(score), 0)  # negative scores (harmful documents in some BEIR sets) mean not relevant
        except ValueError:
            raise bad_row(qrel_file, line_no, f"score {score!r} is not an integer") from None
        judged = qrels.setdefault(qid, {})
        if judged.setdefault(did, gain) != gain:
            raise bad_row(
                qrel_file, line_no, f"query {qid!r} and document {did!r} judged again with another score; keep one"
            )
    unknown = [q for q in qrels if q not in all_queries]
    if unknown:
        raise BadInputError(f"{qrel_file} judges query {unknown[0]!r}, which is not in {query_file}")
    queries = {q: t for q, t in all_queries.items() if q in qrels}
    check_query_texts(queries, query_file)
    return RetrievalDataset(root.name, corpus, queries, qrels, source=str(root))


def check_query_texts(queries: dict[str, str], source: Path) -> None:
    """Raise BadInputError naming the first query (id and file) whose text is blank: it would be searched as
    the special tokens alone, with arbitrary hits (``Retriever.search`` and HTTP /search refuse it too)."""
    for qid, text in queries.items():
        if not text.strip():
            raise BadInputError(f"{source}: query {qid!r} has no text (empty or only white space); give it text")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_retrieval_dataset(
    name: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None, split: str = "test"
) -> RetrievalDataset:
    """``"cranfield"`` (from ``<data_dir>/retrieval/cranfield``) or the path of a BEIR-style folder."""
    if str(name).lower() == "cranfield":
        return read_cranfield(resolve_data_dir(data_dir) / "retrieval" / "cranfield")
    folder = Path(name).expanduser()
    if folder.is_dir():
        if (folder / "cran.all.1400").is_file():
            return read_cranfield(folder)
        return read_beir(folder, split)
    raise DataNotFoundError(f"unknown retrieval dataset {str(name)!r}: give 'cranfield' or a BEIR-style folder")
