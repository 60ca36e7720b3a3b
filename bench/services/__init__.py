"""The services benchmark (``python -m bench services``): compaction, clustering and
reads after updates. ``bench.py`` runs it, ``steps.py`` holds the steps its children run,
``report.py`` the markdown and findings."""
