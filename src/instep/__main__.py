"""``python -m instep`` is the same as the ``instep`` console script."""

from instep.cli import main

if __name__ == "__main__":
    main()
