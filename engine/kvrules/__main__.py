"""``python -m kvrules``: the same command line as the ``kvrules`` console script."""
from kvrules.cli.app import main

if __name__ == "__main__":
    main()
