"""``python -m whitevec.cli``."""

from whitevec.cli import main

main()
