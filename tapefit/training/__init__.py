"""A run and its lifecycle: `train.run` and its phases, runtime set-up, callbacks, optimizers,
status, checkpoints and resume, and the run directory's artefacts."""
