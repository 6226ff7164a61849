"""Whitening inside FAISS: one index file that takes raw encoder vectors.

``export_faiss(DIR, OUT)`` wraps the stored index in ``faiss.IndexPreTransform`` with
``LinearTransform(A = W^T, b = -W^T (beta*mu))`` (so ``y = A x + b = W^T (x - beta*mu)``, the whitening) and,
for the cosine metric, a ``NormalizationTransform`` after it. Then plain ``faiss.read_index(OUT).search(x, k)``
on raw encoder vectors ``x`` gives the same ids (internal rows; ``docs.sqlite`` maps them to document ids) and
scores as whitevec (with one difference: a cosine index with a lossy encoding, sq8 or pq for instance, is
searched by squared L2, so the file returns ``d = 2 - 2 cos``; whitevec reports ``1 - d / 2``). Every encoding
exports (RaBitQ with its rotation too: the codes, IVF lists, HNSW graph and refinement are inside the stored
index) but two: sign codes (a binary index behind whitevec's sign step) and ``+rescore`` (its vectors are a file
of their own). Only linear transforms can be expressed this way: Whitening (any k, beta, gamma), Center, or
none.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.faiss.files import write_faiss_index
from whitevec.index.faiss.library import INDEX_FILE
from whitevec.index.faiss.store import FaissStore
from whitevec.index.folder.layout import LINEAR_NAMES, TRANSFORM_FILE
from whitevec.index.folder.snapshot import IndexSnapshot, read_consistent
from whitevec.preflight import check_output
from whitevec.transforms import Center, Transform, Whitening
from whitevec.utils.io import atomic_path


def linear_parts(transform: Transform | None, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(A, b)`` with ``transform(x) = A x + b``; None for no transform. BadInputError for non-linear ones."""
    if transform is None:
        return None
    if isinstance(transform, Whitening):
        W = np.asarray(transform.components_, dtype=np.float64)  # (d, k)
        A = W.T
        b = -(W.T @ (transform.beta * np.asarray(transform.mean_, dtype=np.float64)))
        return A, b
    if isinstance(transform, Center):
        return np.eye(dim), -np.asarray(transform.mean_, dtype=np.float64)
    raise BadInputError(
        f"a {type(transform).__name__} transform is not linear, so FAISS cannot apply it; export-faiss works for "
        f"{LINEAR_NAMES} or no transform"
    )


def export_faiss(index_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write one FAISS file searching raw encoder vectors (see the module docstring); returns ``out``.

    ``out`` is checked first (not a folder, its folder writable), before the index is read."""
    import faiss

    folder = Path(index_dir).expanduser()
    target = check_output(out, "FAISS file")

    def read(snapshot: IndexSnapshot) -> tuple[dict[str, Any], Transform | None, Any]:
        manifest = snapshot.manifest
        if manifest["backend"] != "faiss":
            raise BadInputError(
                f"{folder} keeps its vectors in {manifest['backend']}; export-faiss needs a faiss index"
            )
        if len(manifest.get("segments") or [None]) > 1 or manifest.get("deleted"):
            raise BadInputError(
                f"{folder} holds {len(manifest.get('segments') or [None])} segments and "
                f"{manifest.get('deleted', 0)} deleted rows since its build; one FAISS file holds one: merge them "
                f"first with `whitevec index compact {folder}`"
            )
        encoding = parse_encoding(manifest["index_params"].get("encoding"))
        if encoding.sign or encoding.rescore is not None:
            raise BadInputError(
                f"{folder} uses encoding {encoding.spec}: "
                + (
                    "sign codes take whitevec's sign step and a faiss binary index, which one float FAISS file "
                    "cannot hold"
                    if encoding.sign
                    else "its rescoring vectors live in a file beside the FAISS index, which the export would drop"
                )
                + "; export-faiss works for the other encodings"
            )
        info = manifest["transform"]
        if info and not info["linear"]:
            raise BadInputError(
                f"{folder} uses transform {info['spec']!r} ({info['class']}), which is not linear; "
                f"export-faiss works for {LINEAR_NAMES} or no transform"
            )
        transform = (
            Transform.from_bytes(snapshot.read_bytes(TRANSFORM_FILE), str(folder / TRANSFORM_FILE))
            if info
            else None
        )
        with snapshot.reader(INDEX_FILE) as read_index:
            stored = FaissStore.read(
                read_index,
                folder / INDEX_FILE,
                manifest["dim"],
                manifest["metric"],
                manifest["index_kind"],
                manifest["index_params"],
            )
        index = stored.index
        return manifest, transform, index

    manifest, transform, index = read_consistent(folder, read)
    d_in, d_out = int(manifest["encoder_dim"]), int(manifest["dim"])
    chain: list[Any] = []
    parts = linear_parts(transform, d_in)
    if parts is not None:
        A, b = parts
        linear = faiss.LinearTransform(d_in, d_out, True)
        faiss.copy_array_to_vector(np.ascontiguousarray(A, dtype=np.float32).ravel(), linear.A)
        faiss.copy_array_to_vector(np.ascontiguousarray(b, dtype=np.float32), linear.b)
        linear.is_trained = True
        chain.append(linear)
    if manifest["metric"] == "cosine":
        chain.append(faiss.NormalizationTransform(d_out, 2.0))
    if not chain:
        wrapped = index
    else:
        wrapped = faiss.IndexPreTransform(chain[-1], index)
        for step in reversed(chain[:-1]):
            wrapped.prepend_transform(step)
    with atomic_path(target) as tmp:
        write_faiss_index(wrapped, tmp)
    return target
