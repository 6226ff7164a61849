"""How close whitevec comes to sentence-transformers, both ways, on the real models (a quality figure: no timing).

Load: ``Encoder(model)`` (pooling ``model``, the folder's own modules) against ``SentenceTransformer(model)``.
Export: ``whitevec export-st`` folders loaded by sentence-transformers in a fresh process against whitevec's
transformed vectors. Each transform is fitted on the first ``--fit`` STS-B sentences (train+dev+test order) and
every comparison runs on the next ``--eval`` sentences. Writes docs/results/st_equality.{json,md}; the page's
hand-written part (below its notes mark) is kept, and ``--render-only`` rewrites the page from the JSON.

    WHITEVEC_DATA=../shared/data python benchmarks/maintained/st_equality.py [--fit 4000] [--eval 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import machine_facts, results_header
from benchmarks.common.pages import NOTES_MARK, kept_notes

from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.export.sentence_transformers import export_sentence_transformer
from whitevec.transforms import Flow, Transform, Whitening

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
# (pooling, transform name, transform factory); the flow only on MiniLM (its fit is the slow part).
CASES = [
    ("model", "whitening", lambda: Whitening()),
    ("model", "whitening-256", lambda: Whitening(n_components=256)),
    ("first-last-avg", "whitening", lambda: Whitening()),
    ("first-last-avg", "flow", lambda: Flow(show_progress=False)),
]


def st_encode(folders: list[Path], texts: list[str], work: Path) -> list[np.ndarray]:
    """Each folder loaded by sentence-transformers in one fresh process, its vectors for ``texts``."""
    (work / "texts.json").write_text(json.dumps(texts))
    code = (
        "import json, sys, numpy as np\n"
        "from sentence_transformers import SentenceTransformer\n"
        f"texts = json.load(open({str(work / 'texts.json')!r}))\n"
        "for i, folder in enumerate(sys.argv[1:]):\n"
        "    model = SentenceTransformer(folder, device='cpu', trust_remote_code=True)\n"
        f"    np.save({str(work)!r} + f'/st-{{i}}.npy', model.encode(texts, batch_size=32))\n"
    )
    with open(work / "st.log", "w") as log:
        done = subprocess.run(
            [sys.executable, "-c", code, *map(str, folders)], stdout=log, stderr=subprocess.STDOUT
        )
    if done.returncode:
        raise SystemExit(f"sentence-transformers failed:\n{(work / 'st.log').read_text()[-3000:]}")
    return [np.load(work / f"st-{i}.npy") for i in range(len(folders))]


def markdown(result: dict[str, Any]) -> list[str]:
    """The page's generated part from the result JSON."""
    machine = result.get("machine")
    header = (
        results_header(f"`{result['command']}`", machine)
        if machine
        else f"Command: `{result['command']}`; machine: not recorded ({result['threads']} CPUs); "
        f"date: {result['date']}"
    )
    lines = [
        "# whitevec and sentence-transformers: equality figures",
        "",
        header,
        "",
        f"{result['date']}, sentence-transformers {result['sentence_transformers']}, CPU float32. "
        f"Transforms fitted on the first {result['fit_sentences']} STS-B sentences (train+dev+test order), "
        f"compared on the next {result['eval_sentences']}.",
        "",
        "load: `Encoder(model)` (pooling `model`) vs `SentenceTransformer(model).encode`; export: "
        "`SentenceTransformer(export-st folder, trust_remote_code=True).encode` in a fresh process vs "
        "`transform.transform(Encoder(model, pooling).encode(texts))`.",
        "",
        "| model | direction | pooling | transform | max_length | max abs diff | max abs value |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['model']} | {r['direction']} | {r['pooling']} | {r['transform']} | {r['max_length']} | "
            f"{r['max_abs_diff']:.2e} | {r['max_abs_value']:.3g} |"
        )
    return lines


def write_page(result: dict[str, Any]) -> None:
    """st_equality.md: the generated part, then the hand-written part of the existing page (below NOTES_MARK)."""
    page = RESULTS / "st_equality.md"
    notes = kept_notes(page).strip()
    lines = [*markdown(result), "", NOTES_MARK, "", *([notes, ""] if notes else [])]
    page.write_text("\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", type=int, default=4000)
    parser.add_argument("--eval", type=int, default=1000)
    parser.add_argument(
        "--render-only", action="store_true", help="measure nothing: rewrite the page from the JSON"
    )
    args = parser.parse_args()
    if args.render_only:
        write_page(json.loads((RESULTS / "st_equality.json").read_text()))
        return
    sentences = load_sts_task("stsb").sentences("target")
    fit_texts, eval_texts = sentences[: args.fit], sentences[args.fit : args.fit + args.eval]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model in MODELS:
            cases = [c for c in CASES if model == MODELS[0] or c[1] != "flow"]
            exported: list[tuple[str, str, np.ndarray, Path]] = []
            encoders: dict[str, Encoder] = {}
            for pooling, name, make in cases:
                if pooling not in encoders:
                    encoders[pooling] = Encoder(model, pooling, cache=False)
                encoder = encoders[pooling]
                transform: Transform = make().fit(encoder.encode(fit_texts))
                ours = transform.transform(encoder.encode(eval_texts))
                folder = work / f"{model}-{pooling}-{name}"
                export_sentence_transformer(folder, encoder, transform)
                exported.append((pooling, name, ours, folder))
            raw = encoders["model"].encode(eval_texts)
            st = st_encode([encoders["model"].model_path] + [e[3] for e in exported], eval_texts, work)
            rows.append(
                {
                    "model": model,
                    "direction": "load",
                    "pooling": f"model ({encoders['model'].st_config.describe()})",
                    "transform": "-",
                    "max_length": encoders["model"].max_length,
                    "max_abs_diff": float(np.abs(raw - st[0]).max()),
                    "max_abs_value": float(np.abs(raw).max()),
                }
            )
            for (pooling, name, ours, _), theirs in zip(exported, st[1:], strict=True):
                rows.append(
                    {
                        "model": model,
                        "direction": "export",
                        "pooling": pooling,
                        "transform": name,
                        "max_length": encoders[pooling].max_length,
                        "max_abs_diff": float(np.abs(ours - theirs).max()),
                        "max_abs_value": float(np.abs(ours).max()),
                    }
                )
            for encoder in encoders.values():
                encoder.close()
    command = "WHITEVEC_DATA=../shared/data python benchmarks/maintained/st_equality.py " + " ".join(sys.argv[1:])
    import sentence_transformers

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "command": command.strip(),
        "sentence_transformers": sentence_transformers.__version__,
        "fit_sentences": len(fit_texts),
        "eval_sentences": len(eval_texts),
        "threads": os.cpu_count(),
        "machine": machine_facts("sentence-transformers"),
        "rows": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "st_equality.json").write_text(json.dumps(result, indent=2) + "\n")
    write_page(result)


if __name__ == "__main__":
    main()
