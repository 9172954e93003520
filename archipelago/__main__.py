"""`python -m archipelago` runs the `archi` CLI."""

from archipelago.cli import main

main()
