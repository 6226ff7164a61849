"""How stale an index's transform is, from its manifest alone: the rows the transform was fitted on against the
rows the index holds now. A build fits the transform; ``Retriever.add`` applies that fit to every row it adds,
so the share of rows added since the fit is what a user reads to decide on a rebuild (docs/results/staleness.md
measures what a stale fit costs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The manifest's ``fit_on`` of a transform fitted on every row the build indexed (whitevec.index.build).
FITTED_ON_CORPUS = "corpus"


def transform_staleness(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``{fit_on, fit_rows, count, added_since_fit, share_added}`` of a checked index manifest.

    ``count`` is the rows the index holds; ``fit_on`` and ``fit_rows`` are what the transform was fitted on
    (the manifest's ``transform`` record). ``added_since_fit`` is how many of the rows were added after the fit,
    ``share_added`` that over ``count`` (0.0 to 1.0). Unknown figures are None:

    - no transform: ``fit_on``, ``fit_rows``, ``added_since_fit`` and ``share_added`` are None (nothing to
      go stale);
    - a transform that came fitted (``fit_on`` ``given``, or no rows fitted at the build): what it was fitted on
      is not recorded, so all but ``count`` are None;
    - fitted on the corpus: every row beyond ``fit_rows`` was added since;
    - fitted on a text file or a sample of the corpus: the build's own rows were all there when it was fitted,
      so 0 while the index has had no add; after an add the manifest no longer says how many rows the build
      held, so None.
    """
    count = int(manifest["count"])
    info = manifest.get("transform")
    unknown: dict[str, Any] = {"fit_on": None, "fit_rows": None, "count": count}
    unknown |= {"added_since_fit": None, "share_added": None}
    if info is None:
        return unknown
    fit_on, fit_rows = str(info["fit_on"]), int(info["fit_rows"])
    if fit_on == "given" or fit_rows == 0:
        # A fit needs rows: 0 means the build took the transform already fitted (the Ray engine records
        # such a one as fitted on "corpus" with 0 rows).
        return unknown | {"fit_on": "given"}
    if fit_on == FITTED_ON_CORPUS:
        # A build indexes the rows it fits on, and nothing removes rows: the rest came by adds. Never below 0,
        # should a writer count its fit rows otherwise.
        added: int | None = max(0, count - fit_rows)
    else:
        added = None if "updated" in manifest else 0
    share = None if added is None else (added / count if count else 0.0)
    return {"fit_on": fit_on, "fit_rows": fit_rows, "count": count, "added_since_fit": added, "share_added": share}
