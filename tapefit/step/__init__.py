"""The tape step: `TapeModel`, the helpers and guards it runs, its telemetry, `gradcheck`."""
