"""``python -m whitevec.cli``."""

from whitevec.cli import run

run()
