"""The schedule explorer: lakeline's real code driven by logical actors, interleaved step
by step at their fault points, with the table's invariants checked after every step.

See README.md in this folder for the design, how to replay a failure and the seeds that
found known bugs.
"""
