"""Benchmarks of lakeline, run from a checkout with ``python -m bench [NAME ...]``.

Each benchmark is a module with ``main(argv: list[str]) -> int``, registered by name in
:data:`bench.__main__.BENCHMARKS`. Results are printed as rich tables and written to a
section of ``docs/performance.md`` that the benchmark owns (see :mod:`bench.report`),
together with the date, the machine and the exact command, so every number in the docs
can be reproduced. Not installed with the package (``tests/test_layout.py`` knows).
"""
