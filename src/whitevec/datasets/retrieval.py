"""Retrieval data: documents, corpus files, and test collections (Cranfield, BEIR-style folders).

Corpus files (``read_corpus_file``), picked by extension:

- ``.jsonl`` / ``.ndjson`` / ``.json``: one JSON object a line with ``"text"`` (string, required) and ``"id"``
  (string or integer, optional: the 1-based number of the document among non-blank lines when absent; then
  ``"_id"``, the BEIR name, is tried too). Every other key goes into the document's ``metadata``.
  ``"title"``, when present, is prepended to the text (``title + " " + text``), as BEIR does.
- ``.csv`` (comma) / ``.tsv`` (TAB): a header row naming a ``text`` column and optionally an ``id`` column;
  other columns become metadata (strings). CSV follows normal quoting; TSV is read with quoting off.
- anything else (``.txt``): one document a line, blank lines skipped; ids are the 1-based line numbers in the
  file, as strings.

Test collections give ``RetrievalDataset(name, corpus, queries, qrels)``: ``qrels[query_id][doc_id] = gain``,
a non-negative integer where 0 is "judged not relevant" and a larger gain means more relevant. The graded
gains feed nDCG; every gain > 0 counts as relevant for recall, MRR and MAP.

Cranfield gain mapping (cranqrel.readme, Cleverdon's codes): code 1 "complete answer" -> gain 4, 2 "high
degree of relevance" -> 3, 3 "useful background" -> 2, 4 "minimum interest" -> 1; code -1 (one line per query,
unexplained in the readme) and 5 "no interest" -> gain 0, i.e. not relevant. ``cran.qry`` numbers its queries
001, 002, 004, ... while ``cranqrel`` numbers them 1..225 in order, so the n-th query in ``cran.qry`` gets id
``str(n)``. A document's text is its ``.W`` body (which starts with the title in this collection); two
documents (471, 995) have an empty body and no title, and are kept with empty text so the collection stays at
1400 documents.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import existing_file, read_lines, resolve_data_dir
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
def read_corpus_file(path: str | os.PathLike[str]) -> list[Document]:
    """Read a corpus file (JSONL, CSV, TSV or plain text; see the module docstring) into documents.

    Raises:
        DataNotFoundError: the file does not exist.
        BadInputError: a row is malformed (file and line named), an id repeats, or the file holds no documents.
    """
    file = existing_file(path, "corpus file")
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        docs = _read_jsonl_corpus(file)
    elif suffix in (".csv", ".tsv"):
        docs = _read_delimited_corpus(file, "," if suffix == ".csv" else "\t")
    else:
        docs = [
            Document(str(i), line.strip())
            for i, line in enumerate(read_lines(file, BadInputError), start=1)
            if line.strip()
        ]
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


def _id_value(value: Any, file: Path, line_no: int) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BadInputError(f"{file}, line {line_no}: id {value!r} must be a string or an integer")
    text = str(value).strip()
    if not text:
        raise BadInputError(f"{file}, line {line_no}: empty id")
    return text


def _read_jsonl_corpus(file: Path) -> list[Document]:
    docs: list[Document] = []
    for line_no, line in enumerate(read_lines(file, BadInputError), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{file}, line {line_no}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise BadInputError(f"{file}, line {line_no}: expected a JSON object with a 'text' field")
        text = row.pop("text", None)
        if not isinstance(text, str):
            raise BadInputError(f"{file}, line {line_no}: field 'text' is missing or not a string")
        title = row.pop("title", None)
        if isinstance(title, str) and title.strip():
            text = f"{title.strip()} {text}"
        raw_id = row.pop("id", row.pop("_id", None))
        doc_id = str(len(docs) + 1) if raw_id is None else _id_value(raw_id, file, line_no)
        docs.append(Document(doc_id, text.strip(), row or None))
    return docs


def _read_delimited_corpus(file: Path, delimiter: str) -> list[Document]:
    lines = read_lines(file, BadInputError)
    reader = (
        csv.reader(lines, delimiter=",", quoting=csv.QUOTE_MINIMAL)
        if delimiter == ","
        else csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    )
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        return []
    if "text" not in header:
        raise BadInputError(f"{file}, line 1: the header must name a 'text' column (and optionally 'id')")
    text_col = header.index("text")
    id_col = header.index("id") if "id" in header else None
    docs: list[Document] = []
    for row in reader:
        line_no = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise BadInputError(f"{file}, line {line_no}: {len(row)} columns, the header has {len(header)}")
        doc_id = str(len(docs) + 1) if id_col is None else _id_value(row[id_col], file, line_no)
        meta = {h: row[i] for i, h in enumerate(header) if i not in (text_col, id_col)}
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
    all_queries = {d.id: d.text for d in _read_jsonl_corpus(query_file)}
    qrels: dict[str, dict[str, int]] = {}
    for line_no, line in enumerate(read_lines(qrel_file, BadInputError), start=1):
        parts = line.split("\t")
        if not line.strip() or (line_no == 1 and not parts[-1].strip().lstrip("-").isdigit()):
            continue  # blank, or the header row
        if len(parts) < 3:
            raise BadInputError(f"{qrel_file}, line {line_no}: expected query-id, corpus-id, score")
        try:
            gain = int(parts[2].strip())
        except ValueError:
            raise BadInputError(f"{qrel_file}, line {line_no}: score {parts[2]!r} is not an integer") from None
        qrels.setdefault(parts[0].strip(), {})[parts[1].strip()] = max(gain, 0)
    unknown = [q for q in qrels if q not in all_queries]
    if unknown:
        raise BadInputError(f"{qrel_file} judges query {unknown[0]!r}, which is not in {query_file}")
    queries = {q: t for q, t in all_queries.items() if q in qrels}
    return RetrievalDataset(root.name, corpus, queries, qrels, source=str(root))


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
