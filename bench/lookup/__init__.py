"""The lookup benchmark (``python -m bench lookup``): point and range queries with and
without indexes. ``bench.py`` runs it, ``systems.py`` holds the queries per system,
``report.py`` the targets, findings and their markdown."""
