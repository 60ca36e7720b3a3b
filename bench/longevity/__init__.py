"""The longevity benchmark (``python -m bench longevity``): a TPC-DS table kept under
writes for many rounds. ``bench.py`` runs it, ``systems.py`` holds the systems compared,
``report.py`` the targets and the markdown."""
