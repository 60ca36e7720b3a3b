"""Small commits and opening on an object store (``python -m bench object-store``): one-row
upserts (commits per second, requests per commit) against deltalake, and opening a table
with a long history. ``bench.py`` runs it, ``child.py`` is the child process of one
measurement, ``wire.py`` counts requests on the wire, ``report.py`` the markdown."""
