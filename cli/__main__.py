"""``python -m lakeline.cli ...`` runs the same command as the ``lakeline`` script, so
the CLI works from a checkout or a virtualenv without the script on ``PATH``."""

from .main import main

if __name__ == "__main__":
    main()
