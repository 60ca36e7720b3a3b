"""The write benchmark (``python -m bench write``): appends, an upsert and a key-range read
against peer table formats. ``bench.py`` runs it, ``systems.py`` holds the systems,
``report.py`` the results, targets and their markdown, ``child.py`` the child process of a step;
``object_store.py`` and ``s3_report.py`` run it on an object store (``--store s3``)."""
