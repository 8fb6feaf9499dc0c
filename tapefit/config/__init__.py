"""Configuration: the shared schemas, Hydra composition, and the checks a composed config must
pass before a run starts."""
