"""Runs: output directories and their locks (:mod:`.rundir`), checkpoint files (:mod:`.checkpoints`), building and
loading models from names, run directories and checkpoints (:mod:`.models`), and options shared by the subcommands
(:mod:`.options`)."""
