"""The write path: incoming rows checked and tagged, planned per file group, written,
validated and committed (with replay on conflict)."""
