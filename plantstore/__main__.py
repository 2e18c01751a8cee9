"""`python -m plantstore`: the `plantstore` command, without its script on the PATH."""

from plantstore.serving.command import main

main()
