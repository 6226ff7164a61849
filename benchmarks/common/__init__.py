"""The one helper the benchmark scripts share (maintained/, pages/, investigations/ import nothing else of
benchmarks/): small modules by job.

- ``runs``: one measurement per fresh subprocess (``run_worker``, ``emit``), medians, result files;
- ``machine``: the machine facts and the conditions a run observed, as its page reports them;
- ``data``: seeded synthetic vectors and a static encoder folder of the real shape;
- ``sts``: the STS tasks and texts, their Spearman table, the token-weight methods;
- ``scale``: the settings and fixtures of the scale benchmarks, which their page and investigations share;
- ``serving``: a server process, its health, one load-generator row (with more /search body fields: the mode);
  ``loadgen.py`` runs in its own process;
- ``pages``: the hand-written notes a regenerated page keeps, and the names of the static page;
- ``hybrid_speed``: the hybrid speed record (bench_hybrid.py's JSON, its arithmetic) and its page section.
"""
