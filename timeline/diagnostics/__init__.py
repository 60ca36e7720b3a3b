"""What a process reports about itself: metrics, redaction of secrets in what it
prints, and the named fault points tests arm to make things go wrong."""
