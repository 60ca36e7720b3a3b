"""The ``lakeline`` command: create tables and inspect their timelines from a shell.

The command is a thin layer over the public Python API (``lakeline.table.Table``);
it owns no table logic, only argument parsing, rendering (rich for people, ``--json``
for scripts) and turning lakeline's typed errors into one-line messages.
"""
