"""``python -m distviz``: the same as the ``distviz`` command."""

from distviz.cli import main

main()
