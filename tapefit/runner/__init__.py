"""A run, top of the library: composing the config, checking it, then training, testing and
writing the run directory. It wires the layers below (`training`, `models`, `data`, `config`) and
nothing below imports it."""
