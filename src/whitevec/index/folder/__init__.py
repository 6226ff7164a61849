"""What an index folder holds: its file names and versions (``layout``), the checked manifest (``manifest``), one
consistent version read (``snapshot``), the raw vectors kept per segment (``raw_vectors``) and rows added since
the transform's fit (``staleness``)."""
