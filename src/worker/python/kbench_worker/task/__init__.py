"""The task as both workers hold it: its file loaded (`taskfile`), its models built and called
(`models`), the inputs of a trial (`inputs`), its parameters perturbed (`params`) and what its
forward returns (`returns`). Both workers do these alike, so they hold the same weights and
inputs without copying them.
"""
