"""Searches: keras-tuner's `tune=<algorithm>`, the search space, trial records, and the summary
of a Hydra multirun."""
